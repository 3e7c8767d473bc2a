package usage_test

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/member/usage"
)

// A usage set in metadata reads back the same, also once the metadata went through JSON (a stored
// task, a task read over a door); metadata without one, or with something else there, reports none.
func TestSetAndRead(t *testing.T) {
	u := usage.Of(usage.Tokens{Input: 10, Output: 2, Cached: 3, CacheWrite: 1, Calls: 2, Unreported: 1}, usage.Tokens{Input: 5, Calls: 1}, 1)
	if want := (usage.Tokens{Input: 15, Output: 2, Cached: 3, CacheWrite: 1, Calls: 3, Unreported: 1}); u.Total != want {
		t.Errorf("Total %+v, want %+v", u.Total, want)
	}
	meta := map[string]any{}
	usage.Set(meta, u)
	b, _ := json.Marshal(map[string]any{ids.Meta: meta})
	var wire map[string]any
	json.Unmarshal(b, &wire)
	for name, m := range map[string]map[string]any{"in memory": meta, "through JSON": ids.Murmur(wire)} {
		got, ok := usage.Read(m)
		if !ok || !cmp.Equal(got, u) {
			t.Errorf("%s: Read = %+v, %v; want %+v", name, got, ok, u)
		}
	}
	for name, m := range map[string]map[string]any{"no metadata": nil, "none": {"member": "lead"}, "null": {"usage": nil}, "not usage": {"usage": "lots"}} {
		if got, ok := usage.Read(m); ok {
			t.Errorf("%s: Read = %+v, want none", name, got)
		}
	}
}

// Meta is what the JSON of a Usage decodes to, key for key and type for type: metadata read back from
// the store and metadata a running task was stamped with compare equal.
func TestMetaIsUsageAsJSONDecodesIt(t *testing.T) {
	u := usage.Of(usage.Tokens{Input: 1, Output: 2, Cached: 3, CacheWrite: 4, Calls: 5, Unreported: 6},
		usage.Tokens{Input: 7, Output: 8, Cached: 9, CacheWrite: 10, Calls: 11, Unreported: 12}, 13)
	b, err := json.Marshal(u)
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]any
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, u.Meta()); diff != "" {
		t.Errorf("Meta differs from the JSON of the usage (-json +Meta):\n%s", diff)
	}
}
