package abi

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// TestPackedRegionsNeverLookLikeStatus: any region that fits in a 32-bit
// memory unpacks to itself, never to a Status.
func TestPackedRegionsNeverLookLikeStatus(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ptr := rapid.Uint32().Draw(t, "ptr")
		size := rapid.Uint32Range(0, ^uint32(0)-ptr).Draw(t, "size")
		p, s, err := UnpackResult(PackResult(ptr, size))
		require.NoError(t, err)
		require.Equal(t, ptr, p)
		require.Equal(t, size, s)
	})
}

func TestUnpackResultStatus(t *testing.T) {
	for _, st := range []Status{StatusBadRequest, StatusGuestFailure, StatusUnsupportedVersion, MinStatus} {
		p, s, err := UnpackResult(int64(st))
		require.Zero(t, p)
		require.Zero(t, s)
		var got Status
		require.True(t, errors.As(err, &got))
		require.Equal(t, st, got)
	}
	p, s, err := UnpackResult(0)
	require.NoError(t, err)
	require.Zero(t, p)
	require.Zero(t, s)
	// Just below MinStatus is a region (ptr 0xffffffff, size 0xfffff000):
	// out of bounds, which the host's memory read then reports.
	p, s, err = UnpackResult(int64(MinStatus) - 1)
	require.NoError(t, err)
	require.Equal(t, uint32(0xffffffff), p)
	require.Equal(t, uint32(0xfffff000), s)
}

func TestStatusText(t *testing.T) {
	require.Equal(t, "guest returned status -2 (guest failure)", StatusGuestFailure.Error())
	require.Equal(t, "request could not be decoded", StatusBadRequest.String())
	require.Equal(t, "unsupported ABI version", StatusUnsupportedVersion.String())
	require.Equal(t, "guest returned status -9 (status -9)", Status(-9).Error())
}

func TestVersionMarker(t *testing.T) {
	require.Equal(t, ExportVersionMarker, VersionMarker(Version))
	require.Equal(t, "flowhost_abi_v2", VersionMarker(2))
}

func TestStateOpString(t *testing.T) {
	require.Equal(t, "keep", StateKeep.String())
	require.Equal(t, "replace", StateReplace.String())
	require.Equal(t, "delete", StateDelete.String())
	require.Equal(t, "StateOp(9)", StateOp(9).String())
}
