package conformance_test

import "github.com/flowhost/flowhost/sdk/conformance"

// windowGuests are the languages whose window guest (the behaviour of
// /work/briefs/windowguest.md, the design of sdk/WINDOWS.md) runs through
// the real host in TestWindowsThroughHost. REGISTRATION POINT: the Rust, C
// and AssemblyScript guests are added here, each as
//
//	conformance.Guest{Name: "rust", Build: rust.BuildWindowGuest},
//
// once their SDK package exports BuildWindowGuest.
var windowGuests = []conformance.Guest{
	{Name: "go", Build: conformance.BuildWindowGuest},
}
