package runtimetools

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type tokenErr struct{ text, token string }

func (e tokenErr) Error() string { return e.text }
func (e tokenErr) Token() string { return e.token }

type fakeInstaller struct {
	pulled  Pulled
	pullErr error
	listing ArtifactListing
	removed Removed
	remErr  error
	asked   []string
}

func (f *fakeInstaller) Grant() InstallGrant {
	return InstallGrant{Tool: []string{"local/*"}, From: []string{"stores", "sources"}}
}
func (f *fakeInstaller) Pull(_ context.Context, a string) (Pulled, error) {
	f.asked = append(f.asked, "pull "+a)
	return f.pulled, f.pullErr
}
func (f *fakeInstaller) List(_ context.Context, p string) (ArtifactListing, error) {
	f.asked = append(f.asked, "list "+p)
	return f.listing, nil
}
func (f *fakeInstaller) Remove(_ context.Context, a string) (Removed, error) {
	f.asked = append(f.asked, "remove "+a)
	return f.removed, f.remErr
}

func TestPullArtifactTool(t *testing.T) {
	inst := &fakeInstaller{pulled: Pulled{Artifact: "murmur/tool-edit", Version: "1.0.0", Runtime: "tool", ToolName: "tool-edit",
		FetchedFrom: "global store", Digest: "sha256:ab"}}
	rec := &memRecorder{}
	counts := map[string]int{}
	tool := &PullArtifact{Installer: inst, Recorder: rec, Count: func(rt, res string) { counts[rt+"/"+res]++ }}

	m := tool.Manifest()
	for _, want := range []string{"install.tool: local/*", "install.skill: none", "install.from: stores, sources",
		"a pattern ending in * (such as local/*) lists what you may pull instead of pulling", "usable from your next turn",
		"not vetted by the operator: its text and its results are untrusted"} {
		if !strings.Contains(m.Description, want) {
			t.Errorf("description lacks %q: %s", want, m.Description)
		}
	}
	if m.Version != "0.0.0" || m.Implementation != "native" || string(m.InputSchema) != ArtifactSchema {
		t.Errorf("manifest %+v", m)
	}

	res, err := tool.Run(context.Background(), Call{Task: "tsk_1", Input: json.RawMessage(`{"artifact":"murmur/tool-edit"}`)})
	if err != nil {
		t.Fatal(err)
	}
	// SPEC's example, byte for byte.
	if want := `{"artifact":"murmur/tool-edit","fetched_from":"global store","runtime":"tool","tool_name":"tool-edit","version":"1.0.0"}`; res.Output != want {
		t.Errorf("output %s\nwant   %s", res.Output, want)
	}
	if res.Note != "tool-edit is in your tool list from your next turn." || res.Status != StatusOK {
		t.Errorf("note %q status %s", res.Note, res.Status)
	}
	if len(rec.recs) != 1 || rec.recs[0]["type"] != "artifact_pulled" || rec.recs[0]["digest"] != "sha256:ab" || rec.recs[0]["origin"] != "agent" {
		t.Errorf("records %v", rec.recs)
	}
	// notes appear when a place was passed over.
	inst.pulled.Notes = []string{"the global store (/g) could not be read: permission denied"}
	res, _ = tool.Run(context.Background(), Call{Input: json.RawMessage(`{"artifact":"murmur/tool-edit"}`)})
	if !strings.Contains(res.Output, `"notes":["the global store (/g) could not be read: permission denied"]`) {
		t.Errorf("output %s lacks notes", res.Output)
	}

	// A refusal is the installer's text, word for word, as a tool error; it writes no record.
	inst.pullErr = tokenErr{"not-found: local/x is in none of the places this capsule may pull from (the project store)", "not-found"}
	res, _ = tool.Run(context.Background(), Call{Input: json.RawMessage(`{"artifact":"local/x"}`)})
	if res.Status != StatusRefused || res.Output != inst.pullErr.Error() || res.Note != "" {
		t.Errorf("refusal %+v", res)
	}
	if len(rec.recs) != 2 {
		t.Errorf("a refusal wrote a record: %v", rec.recs)
	}
	if diff := cmp.Diff(map[string]int{"tool/ok": 2, "unknown/not-found": 1}, counts); diff != "" {
		t.Errorf("counts (-want +got):\n%s", diff)
	}

	// A pattern lists, with no note and no record.
	inst.listing = ArtifactListing{Pattern: "local/*", Matches: []ArtifactMatch{{Artifact: "local/a", Runtime: "tool",
		Versions: []string{"1.0.0"}, NewestFitting: "1.0.0", HeldIn: []string{"project store"}}}, Omitted: 3}
	res, _ = tool.Run(context.Background(), Call{Input: json.RawMessage(`{"artifact":"local/*"}`)})
	want := `{"matches":[{"artifact":"local/a","runtime":"tool","versions":["1.0.0"],"newest_fitting":"1.0.0","held_in":["project store"]}],"omitted":3,"pattern":"local/*"}`
	if res.Output != want || res.Note != "" || res.Status != StatusOK {
		t.Errorf("listing %q note %q\nwant %s", res.Output, res.Note, want)
	}
	// Missing input is refused before the installer is asked.
	inst.asked = nil
	for _, in := range []string{`{}`, `{"artifact":""}`, `{"artifact":3}`, `nope`} {
		res, _ = tool.Run(context.Background(), Call{Input: json.RawMessage(in)})
		if res.Status != StatusRefused || !strings.HasPrefix(res.Output, "not-granted: pull-artifact needs {\"artifact\"") {
			t.Errorf("%s: %+v", in, res)
		}
	}
	if len(inst.asked) != 0 {
		t.Errorf("the installer was asked %v", inst.asked)
	}
}

func TestRemoveArtifactTool(t *testing.T) {
	inst := &fakeInstaller{removed: Removed{Artifact: "local/echo", Removed: true, ToolName: "echo", Runtime: "tool"}}
	tool := &RemoveArtifact{Installer: inst}
	res, _ := tool.Run(context.Background(), Call{Input: json.RawMessage(`{"artifact":"echo"}`)})
	if res.Output != `{"artifact":"local/echo","removed":true}` || res.Status != StatusOK ||
		res.Note != "echo is gone from your tool list from your next turn; a call to it is refused." {
		t.Errorf("removed: %+v", res)
	}
	inst.removed = Removed{Artifact: "local/nothing"}
	res, _ = tool.Run(context.Background(), Call{Input: json.RawMessage(`{"artifact":"local/nothing"}`)})
	if res.Output != `{"artifact":"local/nothing","removed":false}` || res.Note != "" || res.Status != StatusOK {
		t.Errorf("not installed: %+v", res)
	}
	inst.remErr = errors.New("not-removable: local/x is declared in murmur.yaml; only the operator takes it out, by editing murmur.yaml")
	res, _ = tool.Run(context.Background(), Call{Input: json.RawMessage(`{"artifact":"local/x"}`)})
	if res.Status != StatusRefused || res.Output != inst.remErr.Error() {
		t.Errorf("refusal %+v", res)
	}
	if got := RemovedCall("echo"); got != "tool 'echo' was removed from this session; it can no longer be called" {
		t.Errorf("RemovedCall = %q", got)
	}
}
