package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestThousands(t *testing.T) {
	for n, want := range map[int]string{0: "0", 7: "7", 999: "999", 1000: "1,000", 123456: "123,456", 1234567: "1,234,567", -1234: "-1,234"} {
		require.Equal(t, want, thousands(n), "%d", n)
	}
}

func TestHuman(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                                      "0",
		255 * time.Millisecond:                 "255ms",
		-4*time.Minute - 7400*time.Millisecond: "-4m7.4s",
		2 * time.Minute:                        "2m",
		65*time.Hour + 21*time.Minute + 40*time.Second: "65h22m",
	} {
		require.Equal(t, want, human(d), "%v", time.Duration(d))
	}
}

func TestCompare(t *testing.T) {
	require.Equal(t, "2.5x fewer", compare(250, 100, "fewer", "more", "same"))
	require.Equal(t, "1.3x more", compare(100, 130, "fewer", "more", "same"))
	require.Equal(t, "same", compare(100, 105, "fewer", "more", "same"))
	require.Equal(t, "none with bias+delays", compare(3, 0, "fewer", "more", "same"))
	require.Equal(t, "none in either", compare(0, 0, "fewer", "more", "same"))
}
