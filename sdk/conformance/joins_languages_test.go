package conformance_test

import (
	"github.com/flowhost/flowhost/sdk/assemblyscript"
	"github.com/flowhost/flowhost/sdk/c"
	"github.com/flowhost/flowhost/sdk/conformance"
	"github.com/flowhost/flowhost/sdk/rust"
)

// joinGuests are the languages whose join guest (README.md, "The join
// guest"; the contract of sdk/JOINS.md) runs through the real host in
// TestJoinsThroughHost, each built by its own SDK package.
var joinGuests = []conformance.Guest{
	{Name: "go", Build: conformance.BuildJoinGuest},
	{Name: "c", Build: c.BuildJoinGuest},
	{Name: "rust", Build: rust.BuildJoinGuest},
	{Name: "assemblyscript", Build: assemblyscript.BuildJoinGuest},
}
