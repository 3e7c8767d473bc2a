package staged

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/murmur-run/murmur/runtimetools"
)

// The memo answers what marshalling answers, for the same manifest and after it; a manifest that would
// take it past its bound is marshalled and not kept.
func TestManifestMemoAnswersWhatMarshallingDoes(t *testing.T) {
	mm := &manifestMemo{bodies: map[string][]byte{}}
	m := runtimetools.NativeManifest("session-status", "Reports the session's status.", json.RawMessage(`{"type":"object","properties":{}}`))
	want, err := manifestYAML(m)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		got, err := mm.body(m)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(string(want), string(got)); diff != "" {
			t.Errorf("the memo's body (-marshalled +memo):\n%s", diff)
		}
	}
	other := m
	other.Description = "Another description."
	if got, _ := mm.body(other); strings.Contains(string(got), "status.") || !strings.Contains(string(got), "Another description.") {
		t.Errorf("another manifest's body:\n%s", got)
	}
	if len(mm.bodies) != 2 {
		t.Errorf("the memo keeps %d bodies, want 2", len(mm.bodies))
	}
	large := m
	large.Description = strings.Repeat("a peer, ", manifestMemoMax/8)
	if _, err := mm.body(large); err != nil {
		t.Fatal(err)
	}
	if len(mm.bodies) != 2 || mm.bytes > manifestMemoMax {
		t.Errorf("after a manifest past the bound the memo keeps %d bodies, %d bytes", len(mm.bodies), mm.bytes)
	}
	bad := m
	bad.Name, bad.InputSchema = "bad", json.RawMessage(`{`)
	if _, err := mm.body(bad); err == nil {
		t.Error("a schema that is not JSON: nil error")
	}
}
