package watch_test

import (
	"crypto/sha256"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/flowhost/flowhost/host/internal/watch"
)

// A plugin is rebuilt: the module is written, then the manifest with the new
// checksum. The host hears about it once, after the directory is quiet, and
// reloads the plugin.
func Example() {
	root, err := os.MkdirTemp("", "watch-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(root)
	dir := filepath.Join(root, "echo")
	if err := os.Mkdir(dir, 0o755); err != nil {
		log.Fatal(err)
	}
	build := func(version string) {
		module := []byte("\x00asm\x01\x00\x00\x00" + version)
		manifest := fmt.Sprintf("name: echo\nversion: %s\nabi: 1\nkinds: [transform]\nwasm: echo.wasm\nsha256: %x\n",
			version, sha256.Sum256(module))
		if err := os.WriteFile(filepath.Join(dir, "echo.wasm"), module, 0o644); err != nil {
			log.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "plugin.yaml"), []byte(manifest), 0o644); err != nil {
			log.Fatal(err)
		}
	}
	build("1.0.0")

	// Create the Watcher before loading the plugins, so that a change made
	// while they load is reported.
	w, err := watch.New([]string{dir}, watch.WithDebounce(50*time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}
	defer w.Close()

	build("1.0.1")

	select {
	case changed := <-w.Changes():
		fmt.Println("reload", filepath.Base(changed))
	case err := <-w.Errors():
		fmt.Println("watch error:", err)
	case <-time.After(10 * time.Second):
		fmt.Println("no notification")
	}
	// Output: reload echo
}
