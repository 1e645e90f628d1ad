package c_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	c "github.com/flowhost/flowhost/sdk/c"
)

func TestBuildWindowGuestTry(t *testing.T) {
	p, err := c.BuildWindowGuest(t.TempDir())
	require.NoError(t, err)
	t.Log(p)
}
