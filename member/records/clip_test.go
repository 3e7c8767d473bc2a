package records

import "testing"

func TestClipCutsOnARuneBoundary(t *testing.T) {
	if got := Clip("short", 10); got != "short" {
		t.Errorf("clip of a short text = %q", got)
	}
	got := Clip("ab\u00e9cd", 3) // é is two bytes, starting at byte 2
	if got != "ab\n[… 4 more bytes not recorded]" {
		t.Errorf("clip = %q", got)
	}
}
