package guest

import (
	"errors"
	"strings"
	"testing"

	"github.com/murmur-run/murmur/member/artifact/wit"
)

// fake replaces the host module for a test: it records the call and answers ans.
func fake(t *testing.T, ans string) *[]string {
	t.Helper()
	var got []string
	old := host
	host = func(fn string, req []byte) ([]byte, error) {
		got = append(got, fn+" "+string(req))
		return []byte(ans), nil
	}
	t.Cleanup(func() { host = old })
	return &got
}

// Pull and Infer send their request's JSON to their function and read its answer; a refusal is a
// *wit.Refusal with the answer's text.
func TestPullAndInfer(t *testing.T) {
	got := fake(t, `{"artifact": "local/x", "version": "1.0.0"}`)
	data, err := Pull("local/x")
	if err != nil || string(data) != `{"artifact": "local/x", "version": "1.0.0"}` {
		t.Errorf("Pull: %s, %v", data, err)
	}
	if want := `manage_pull {"artifact":"local/x"}`; len(*got) != 1 || (*got)[0] != want {
		t.Errorf("the host got %q, want %q", *got, want)
	}

	got = fake(t, `{"text": "yes", "usage": {"input": 4, "output": 1}}`)
	ans, err := Infer(wit.InferenceRequest{Messages: []wit.Message{{Role: wit.RoleUser, Text: "ok?"}}})
	if err != nil || ans != (wit.InferenceAnswer{Text: "yes", Usage: wit.Usage{Input: 4, Output: 1}}) {
		t.Errorf("Infer: %+v, %v", ans, err)
	}
	if want := `run_inference {"messages":[{"role":"user","text":"ok?"}]}`; len(*got) != 1 || (*got)[0] != want {
		t.Errorf("the host got %q, want %q", *got, want)
	}

	fake(t, `{"error": "over-limit: inference.max_turns (3) reached"}`)
	_, err = Infer(wit.InferenceRequest{Messages: []wit.Message{{Role: wit.RoleUser, Text: "ok?"}}})
	var r *wit.Refusal
	if !errors.As(err, &r) || r.Text != "over-limit: inference.max_turns (3) reached" {
		t.Errorf("a refused Infer: %v, want the *wit.Refusal", err)
	}
	if _, err := Pull("local/x"); !errors.As(err, &r) {
		t.Errorf("a refused Pull: %v, want a *wit.Refusal", err)
	}

	fake(t, `[1, 2]`)
	if _, err := Infer(wit.InferenceRequest{}); err == nil || errors.As(err, &r) || !strings.Contains(err.Error(), "not {\"text\", \"usage\"}") {
		t.Errorf("an answer that is no inference answer: %v", err)
	}
}

// Outside a wasip1 module both functions say where they exist.
func TestOutsideWasip1(t *testing.T) {
	if _, err := roundTrip(wit.FnManagePull, []byte(`{}`)); err == nil || !strings.Contains(err.Error(), "GOOS=wasip1 GOARCH=wasm") {
		t.Errorf("roundTrip on this platform: %v", err)
	}
	if _, err := Pull("local/x"); err == nil || !strings.Contains(err.Error(), "murmur.manage_pull exists only in a WebAssembly module") {
		t.Errorf("Pull on this platform: %v", err)
	}
	if _, err := Infer(wit.InferenceRequest{}); err == nil || !strings.Contains(err.Error(), "murmur.run_inference exists only") {
		t.Errorf("Infer on this platform: %v", err)
	}
}
