// The package entry: `import { ... } from "@flowhost/sdk"` resolves here.
export * from "./assembly/index";
