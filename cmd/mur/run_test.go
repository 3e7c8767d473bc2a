package main

import (
	"io"
	"testing"
)

// loadRoster hands the formation the capsules staging loaded, one for each member's directory, so that
// mur run parses each capsule once.
func TestLoadRosterReturnsStagingsCapsules(t *testing.T) {
	path := writeScaleFormation(t, t.TempDir(), 3)
	r, capsules, err := loadRoster(path, "", nil, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(capsules) != len(r.Members) {
		t.Fatalf("%d capsules for %d members", len(capsules), len(r.Members))
	}
	for _, m := range r.Members {
		if c := capsules[m.Capsule]; c == nil || c.Name != m.Name {
			t.Errorf("member %s: capsule %+v, want its own, loaded by staging", m.Name, c)
		}
	}
}
