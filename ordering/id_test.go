package ordering

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// rtMustParseID parses text that the test knows to be valid.
func rtMustParseID(t testing.TB, s string) MessageID {
	t.Helper()
	id, err := ParseMessageID(s)
	require.NoError(t, err, "parse %q", s)
	return id
}

func TestMessageIDOrder(t *testing.T) {
	// Each row says: before < after, by value. The text order of several rows
	// is the opposite, which is the point of a structured id.
	tests := []struct {
		name          string
		before, after string
	}{
		{"partition compares as a number", "orders/p9:0", "orders/p10:0"},
		{"sequence compares as a number", "orders/p0:9", "orders/p0:10"},
		{"offset before partition is not consulted", "orders/p1:999", "orders/p2:0"},
		{"name compares as text", "a/p5:5", "b/p0:0"},
		{"derived right after its parent", "orders/p3:42", "orders/p3:42>enriched:0"},
		{"derived before its parent's next sibling", "orders/p3:42>enriched:0", "orders/p3:43"},
		{"deep derivation before the parent's next sibling", "orders/p3:42>x:99>y:7", "orders/p3:43"},
		{"derived index compares as a number", "orders/p3:42>enriched:9", "orders/p3:42>enriched:10"},
		{"sibling streams compare by name", "orders/p3:42>a:5", "orders/p3:42>b:0"},
		{"prefix first", "t/p0:1>s:2", "t/p0:1>s:2>u:0"},
		{"zero first", "", "a/p0:0"},
		{"zero before a map-style root", "", "a:0"},
		{"no partition before partition 0", "a:7", "a/p0:0"},
		{"transform outputs in production order", "enrich/p2:9", "enrich/p2:10"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := rtMustParseID(t, tt.before), rtMustParseID(t, tt.after)
			require.Equal(t, -1, a.Compare(b))
			require.Equal(t, 1, b.Compare(a))
			require.False(t, a.Equal(b))
			require.Equal(t, 0, a.Compare(a))
			require.True(t, b.Equal(b))
		})
	}
}

func TestMessageIDConstructors(t *testing.T) {
	src := SourceID("orders", 3, 42)
	require.Equal(t, "orders/p3:42", src.String())
	require.Equal(t, Segment{Name: "orders", Partition: 3, Seq: 42}, src.Root())

	tr := TransformID("enrich", 0, 7)
	require.Equal(t, "enrich/p0:7", tr.String())

	d := src.Derive("enriched", 1)
	require.Equal(t, "orders/p3:42>enriched:1", d.String())
	require.Equal(t, []Segment{
		{Name: "orders", Partition: 3, Seq: 42},
		{Name: "enriched", Partition: NoPartition, Seq: 1},
	}, d.Segments())
	require.Equal(t, src.Root(), d.Root(), "deriving keeps the root")

	// Derive must not share the parent's backing array: two children of one
	// parent stay distinct.
	d0, d1 := src.Derive("x", 0), src.Derive("y", 5)
	require.Equal(t, "orders/p3:42>x:0", d0.String())
	require.Equal(t, "orders/p3:42>y:5", d1.String())
	require.Equal(t, "orders/p3:42", src.String())

	segs := d.Segments()
	segs[0].Name = "mutated"
	require.Equal(t, "orders/p3:42>enriched:1", d.String(), "Segments returns a copy")

	var zero MessageID
	require.True(t, zero.IsZero())
	require.False(t, src.IsZero())
	require.Equal(t, "", zero.String())
	require.Equal(t, Segment{}, zero.Root())
	require.Empty(t, zero.Segments())
}

func TestMessageIDTextRoundTrip(t *testing.T) {
	for _, s := range []string{
		"",
		"orders/p3:42",
		"orders/p0:0",
		"orders/p2147483647:18446744073709551615",
		"orders/p3:42>enriched:0",
		"enrich/p2:10>out.v2:3>Final_Stream-1:0",
		"plain:0",
	} {
		t.Run(s, func(t *testing.T) {
			id := rtMustParseID(t, s)
			require.Equal(t, s, id.String())

			text, err := id.MarshalText()
			require.NoError(t, err)
			require.Equal(t, s, string(text))

			appended, err := id.AppendText([]byte("id="))
			require.NoError(t, err)
			require.Equal(t, "id="+s, string(appended))

			var back MessageID
			require.NoError(t, back.UnmarshalText(text))
			require.True(t, back.Equal(id))
		})
	}
}

func TestParseMessageIDErrors(t *testing.T) {
	tests := []struct {
		in string
		// want are substrings the error must contain: the segment, its byte
		// position in the input and the reason.
		want []string
	}{
		{"orders/p03:1", []string{"segment 0, byte 8:", "partition", "leading zero"}},
		{"orders/p3:01", []string{"segment 0, byte 10:", "sequence", "leading zero"}},
		{"orders/p3", []string{"segment 0, byte 9:", "missing ':SEQ'"}},
		{"orders/p3:", []string{"segment 0, byte 10:", "sequence", "empty number"}},
		{"orders/p3:1>enriched", []string{"segment 1, byte 20:", "missing ':SEQ'"}},
		{"orders/p3:1>enr ched:0", []string{"segment 1, byte 15:", `' ' is not a letter`}},
		{"ord#rs/p3:1", []string{"segment 0, byte 3:", `'#' is not a letter`}},
		{"orders/p2147483648:1", []string{"segment 0, byte 8:", "partition", "out of range"}},
		{"orders/p3:18446744073709551616", []string{"segment 0, byte 10:", "sequence", "out of range"}},
		{"orders/p-1:1", []string{"segment 0, byte 8:", "partition", "'-' is not a digit"}},
		{"orders/p3:+1", []string{"segment 0, byte 10:", "sequence", "'+' is not a digit"}},
		{"orders/p:1", []string{"partition", "empty number"}},
		{"/p3:1", []string{"empty name"}},
		{"a:1>>b:2", []string{"segment 1, byte 4:", "missing ':SEQ'"}},
		{"a:1>", []string{"segment 1, byte 4:", "missing ':SEQ'"}},
		{"a/p1/p2:3", []string{"segment 0, byte 1:", `'/' is not a letter`}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			_, err := ParseMessageID(tt.in)
			require.Error(t, err)
			require.True(t, errors.Is(err, ErrMessageID), "wraps ErrMessageID: %v", err)
			require.Contains(t, err.Error(), fmt.Sprintf("%q", tt.in), "names the input")
			for _, w := range tt.want {
				require.Contains(t, err.Error(), w)
			}

			var id MessageID
			require.ErrorIs(t, id.UnmarshalText([]byte(tt.in)), ErrMessageID)
			require.True(t, id.IsZero(), "a failed UnmarshalText leaves the id alone")
		})
	}
}

func TestCheckName(t *testing.T) {
	for _, ok := range []string{"a", "orders", "Out_2", "v1.2-beta", "0"} {
		require.NoError(t, CheckName(ok), ok)
	}
	for _, bad := range []string{"", "a b", "a/b", "a:b", "a>b", "é", "a\x00"} {
		require.Error(t, CheckName(bad), "%q", bad)
	}
}

// rtGenName draws a valid stream or computation name from a small alphabet so
// that names often collide and prefixes of each other occur.
func rtGenName() *rapid.Generator[string] {
	return rapid.StringOfN(rapid.SampledFrom([]rune("ab._-Z9")), 1, 3, -1)
}

func rtGenSegment(root bool) *rapid.Generator[Segment] {
	return rapid.Custom(func(t *rapid.T) Segment {
		s := Segment{Name: rtGenName().Draw(t, "name"), Partition: NoPartition}
		if root || rapid.Bool().Draw(t, "partitioned") {
			s.Partition = rapid.OneOf(rapid.Int32Range(0, 12), rapid.Int32Range(0, 1<<31-1)).Draw(t, "partition")
		}
		s.Seq = rapid.OneOf(rapid.Uint64Range(0, 12), rapid.Uint64()).Draw(t, "seq")
		return s
	})
}

// rtGenID draws ids that often share prefixes, so that Compare's deeper
// segments and the prefix rule are exercised.
func rtGenID() *rapid.Generator[MessageID] {
	return rapid.Custom(func(t *rapid.T) MessageID {
		n := rapid.IntRange(0, 4).Draw(t, "segments")
		if n == 0 {
			return MessageID{}
		}
		root := rtGenSegment(true).Draw(t, "root")
		id := SourceID(root.Name, root.Partition, root.Seq)
		for i := 1; i < n; i++ {
			s := rtGenSegment(false).Draw(t, "segment")
			id = id.Derive(s.Name, s.Seq)
		}
		return id
	})
}

// rtGenIDNear draws an id related to base: itself, a prefix, an extension or
// a sibling, which random independent ids would rarely be.
func rtGenIDNear(base MessageID) *rapid.Generator[MessageID] {
	return rapid.Custom(func(t *rapid.T) MessageID {
		segs := base.Segments()
		switch rapid.IntRange(0, 3).Draw(t, "relation") {
		case 0:
			return base
		case 1:
			k := rapid.IntRange(0, len(segs)).Draw(t, "prefix")
			return rtIDFromSegments(segs[:k])
		case 2:
			s := rtGenSegment(false).Draw(t, "extension")
			if base.IsZero() {
				return SourceID(s.Name, 0, s.Seq)
			}
			return base.Derive(s.Name, s.Seq)
		default:
			if len(segs) == 0 {
				return base
			}
			last := &segs[len(segs)-1]
			last.Seq = rapid.Uint64Range(0, 12).Draw(t, "sibling")
			return rtIDFromSegments(segs)
		}
	})
}

func rtIDFromSegments(segs []Segment) MessageID {
	if len(segs) == 0 {
		return MessageID{}
	}
	id := SourceID(segs[0].Name, segs[0].Partition, segs[0].Seq)
	for _, s := range segs[1:] {
		id = id.Derive(s.Name, s.Seq)
	}
	return id
}

func TestMessageIDCompareIsTotalOrder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a := rtGenID().Draw(t, "a")
		b := rtGenIDNear(a).Draw(t, "b")
		c := rapid.OneOf(rtGenIDNear(a), rtGenIDNear(b), rtGenID()).Draw(t, "c")

		ab, ba := a.Compare(b), b.Compare(a)
		if ab != -ba {
			t.Fatalf("not antisymmetric: %v cmp %v = %d, reverse %d", a, b, ab, ba)
		}
		if a.Compare(a) != 0 {
			t.Fatalf("not reflexive: %v", a)
		}
		if (ab == 0) != a.Equal(b) {
			t.Fatalf("Equal(%v, %v) = %v but Compare = %d", a, b, a.Equal(b), ab)
		}
		// Equal values have equal text and vice versa: the text form is
		// canonical.
		if (ab == 0) != (a.String() == b.String()) {
			t.Fatalf("Compare(%q, %q) = %d disagrees with text equality", a, b, ab)
		}
		bc, ac := b.Compare(c), a.Compare(c)
		if ab <= 0 && bc <= 0 && ac > 0 {
			t.Fatalf("not transitive: %v <= %v <= %v but first > last", a, b, c)
		}
		if ab >= 0 && bc >= 0 && ac < 0 {
			t.Fatalf("not transitive: %v >= %v >= %v but first < last", a, b, c)
		}

		for _, id := range []MessageID{a, b, c} {
			back, err := ParseMessageID(id.String())
			if err != nil {
				t.Fatalf("String %q does not parse: %v", id, err)
			}
			if !back.Equal(id) || back.String() != id.String() {
				t.Fatalf("round trip %q -> %q", id, back)
			}
		}
	})
}

func TestMessageIDDeriveSortsBetweenParentAndNextSibling(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		parent := rtGenID().Filter(func(id MessageID) bool { return !id.IsZero() }).Draw(t, "parent")
		segs := parent.Segments()
		last := &segs[len(segs)-1]
		if last.Seq == ^uint64(0) {
			last.Seq--
			parent = rtIDFromSegments(segs)
			segs = parent.Segments()
			last = &segs[len(segs)-1]
		}
		last.Seq++
		next := rtIDFromSegments(segs)

		child := parent
		for range rapid.IntRange(1, 3).Draw(t, "depth") {
			s := rtGenSegment(false).Draw(t, "child")
			child = child.Derive(s.Name, s.Seq)
		}
		if parent.Compare(child) >= 0 || child.Compare(next) >= 0 {
			t.Fatalf("want %v < %v < %v", parent, child, next)
		}
	})
}

func FuzzParseMessageID(f *testing.F) {
	for _, s := range []string{
		"", "orders/p3:42", "orders/p3:42>enriched:0", "a:0", "a/p0:0>b:1>c:2",
		"orders/p03:1", "orders/p3:01", "orders/p3", "a:1>", ">a:1", "a/p1/p2:3",
		"orders/p2147483648:1", "a:18446744073709551615", "a:18446744073709551616",
		"a/p:1", "a/p+1:1", "é:1", "a:1>>b:2",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParseMessageID(s)
		if err != nil {
			if !errors.Is(err, ErrMessageID) {
				t.Fatalf("error does not wrap ErrMessageID: %v", err)
			}
			if !strings.Contains(err.Error(), ", byte ") {
				t.Fatalf("error names no byte position: %v", err)
			}
			return
		}
		if got := id.String(); got != s {
			t.Fatalf("ParseMessageID(%q).String() = %q: accepted a non-canonical form", s, got)
		}
		again, err := ParseMessageID(id.String())
		if err != nil {
			t.Fatalf("canonical form %q does not parse: %v", id, err)
		}
		if again.Compare(id) != 0 {
			t.Fatalf("re-parsed %q compares %d", s, again.Compare(id))
		}
	})
}
