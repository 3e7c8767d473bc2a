package ids

import (
	"encoding/json"
	"testing"
)

// The trust class and origin read the same from metadata read back from JSON (strings) as from a map the
// session built, and marshal to the same bytes as the strings they name.
func TestTrustAndOriginOfMetadata(t *testing.T) {
	built := NewMeta(map[MetaKey]any{MetaTrust: TrustUntrusted, MetaOrigin: OriginPeer})
	b, err := json.Marshal(built)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"origin":"peer","trust":"untrusted"}` {
		t.Errorf("marshaled %s", b)
	}
	var decoded map[string]any
	if err := json.Unmarshal(b, &decoded); err != nil {
		t.Fatal(err)
	}
	for name, m := range map[string]map[string]any{"built": built, "decoded": decoded} {
		if TrustOf(m) != TrustUntrusted || OriginOf(m) != OriginPeer {
			t.Errorf("%s: trust %q origin %q", name, TrustOf(m), OriginOf(m))
		}
	}
	if TrustOf(nil) != "" || OriginOf(map[string]any{"origin": 7}) != "" {
		t.Error("metadata without a class or origin read as one")
	}
}
