package store

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/ordering"
)

// appendGroup stores records [first, first+n) of orders/p0 as one ingest
// group ingested at wall, each with a WriteTimestamp far in the past.
func appendGroup(t *testing.T, s *Store, first, n uint64, wall int64) {
	t.Helper()
	b := s.NewBatch()
	for off := first; off < first+n; off++ {
		m := msg(ordering.SourceID("orders", 0, off), "orders", "", 1, "p")
		m.Time.Write = 1 // 1970: a historical record
		b.AppendSource("orders", 0, off, m)
	}
	b.SetIngestTime("orders", 0, first, wall)
	b.SetIngest("orders", 0, IngestPosition{Next: first + n})
	require.NoError(t, b.Commit())
}

func TestSourceOffsetIngestedAtCountsFromIngestNotWriteTime(t *testing.T) {
	s := openT(t, t.TempDir())
	appendGroup(t, s, 0, 3, 1000)
	appendGroup(t, s, 3, 2, 2000)
	appendGroup(t, s, 5, 4, 3000)
	for _, tc := range []struct {
		name string
		wall int64
		want uint64
	}{
		{"everything is newer", 500, 0},
		{"at the first group's time", 1000, 0},
		{"between the first and second", 1500, 3},
		{"at the second", 2000, 3},
		{"between the second and third", 2500, 5},
		{"at the third", 3000, 5},
		{"everything is older", 3001, 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.SourceOffsetIngestedAt("orders", 0, tc.wall)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
	// By WriteTimestamp every record is older than any of these times.
	byWrite, err := s.SourceOffsetAt("orders", 0, 500)
	require.NoError(t, err)
	require.Equal(t, uint64(9), byWrite)
}

func TestDeleteSourceBeforeKeepsTheIngestTimeOfWhatRemains(t *testing.T) {
	for _, tc := range []struct {
		name    string
		upTo    uint64
		wantAt4 int64 // ingest time of offset 4 after the deletion
	}{
		{"nothing", 0, 2000},
		{"inside the first group", 2, 2000},
		{"the first group exactly", 3, 2000},
		{"inside the second group", 4, 2000},
		{"the second group exactly", 5, 0}, // offset 4 is gone
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openT(t, t.TempDir())
			appendGroup(t, s, 0, 3, 1000)
			appendGroup(t, s, 3, 2, 2000)
			appendGroup(t, s, 5, 4, 3000)
			b := s.NewBatch()
			b.DeleteSourceBefore("orders", 0, tc.upTo)
			require.NoError(t, b.Commit())
			first, _, err := s.SourceRange("orders", 0)
			require.NoError(t, err)
			require.Equal(t, tc.upTo, first)
			for off := tc.upTo; off < 9; off++ {
				_, ok, err := s.IngestTime("orders", 0, off)
				require.NoError(t, err)
				require.True(t, ok, "offset %d kept its ingest time", off)
			}
			if tc.upTo <= 4 {
				w, _, err := s.IngestTime("orders", 0, 4)
				require.NoError(t, err)
				require.Equal(t, tc.wantAt4, w)
			}
			groups, err := s.ingestGroups("orders", 0)
			require.NoError(t, err)
			require.LessOrEqual(t, groups[0].first, tc.upTo, "no index entry is left wholly below the retained records")
			if len(groups) > 1 {
				require.Greater(t, groups[1].first, tc.upTo)
			}
		})
	}
}

// A store written before ingest times were recorded: its records get the
// time of the first run that finds them, once.
func TestEnsureIngestTimesMigratesAnOldStore(t *testing.T) {
	s := openT(t, t.TempDir())
	b := s.NewBatch()
	for off := uint64(4); off < 7; off++ { // offsets 0-3 already deleted
		b.AppendSource("orders", 0, off, msg(ordering.SourceID("orders", 0, off), "orders", "", 1, "p"))
	}
	require.NoError(t, b.Commit())
	_, ok, err := s.IngestTime("orders", 0, 4)
	require.NoError(t, err)
	require.False(t, ok)

	b = s.NewBatch()
	added, err := s.EnsureIngestTimes(b, "orders", 0, 5000)
	require.NoError(t, err)
	require.True(t, added)
	require.NoError(t, b.Commit())
	w, ok, err := s.IngestTime("orders", 0, 6)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, int64(5000), w)
	got, err := s.SourceOffsetIngestedAt("orders", 0, 4000)
	require.NoError(t, err)
	require.Equal(t, uint64(4), got, "kept for a full period from the migration")

	b = s.NewBatch()
	added, err = s.EnsureIngestTimes(b, "orders", 0, 9000)
	require.NoError(t, err)
	require.False(t, added, "a second run changes nothing")
	b.Discard()

	empty := s.NewBatch()
	added, err = s.EnsureIngestTimes(empty, "other", 0, 9000)
	require.NoError(t, err)
	require.False(t, added, "a partition without records needs no time")
	empty.Discard()
}

// ingestGroups returns a source partition's whole ingest-time index.
func (s *Store) ingestGroups(stream string, partition int) ([]ingestGroup, error) {
	var out []ingestGroup
	err := s.eachIngestGroup(stream, partition, func(g ingestGroup) bool {
		out = append(out, g)
		return true
	})
	return out, err
}
