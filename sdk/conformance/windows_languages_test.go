package conformance_test

import (
	"github.com/flowhost/flowhost/sdk/assemblyscript"
	"github.com/flowhost/flowhost/sdk/c"
	"github.com/flowhost/flowhost/sdk/conformance"
	"github.com/flowhost/flowhost/sdk/rust"
)

// windowGuests are the languages whose window guest (README.md, "Windows
// through the real host"; the design of sdk/WINDOWS.md) runs through the
// real host in TestWindowsThroughHost, each built by its own SDK package.
var windowGuests = []conformance.Guest{
	{Name: "go", Build: conformance.BuildWindowGuest},
	{Name: "c", Build: c.BuildWindowGuest},
	{Name: "rust", Build: rust.BuildWindowGuest},
	{Name: "assemblyscript", Build: assemblyscript.BuildWindowGuest},
}
