package rust

// Exported for the tests of package rust_test.
var (
	CargoCommand = cargoCommand
	WasmArtifact = wasmArtifact
	SDKDir       = sdkDir
	WorkspaceKey = workspaceKey
)

// SetToolchainPath points the toolchain file named by which ("cargo",
// "rustc", "rust-lld" or "registry") at path until restore is called.
func SetToolchainPath(which, path string) (restore func()) {
	p := map[string]*string{"cargo": &cargoPath, "rustc": &rustcPath, "rust-lld": &rustLLDPath, "registry": &registryDir}[which]
	old := *p
	*p = path
	return func() { *p = old }
}
