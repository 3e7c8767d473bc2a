package runtimetools

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/murmur-run/murmur/member/records"
)

type fakeSharer struct {
	file SharedFile
	err  error
	got  string
}

func (f *fakeSharer) ShareSettings() (string, time.Duration) { return "out", time.Hour }
func (f *fakeSharer) ShareFile(_ context.Context, path string) (SharedFile, error) {
	f.got = path
	return f.file, f.err
}

type fakeFetcher struct {
	file FetchedFile
	err  error
	got  FetchRequest
}

func (f *fakeFetcher) FetchLimitMB() int { return 64 }
func (f *fakeFetcher) FetchPeerFile(_ context.Context, req FetchRequest) (FetchedFile, error) {
	f.got = req
	return f.file, f.err
}

type recorded struct {
	typ    string
	fields map[string]any
}

type fakeRecorder struct{ recs []recorded }

func (r *fakeRecorder) Write(typ records.Type, _ string, fields map[string]any) error {
	r.recs = append(r.recs, recorded{string(typ), fields})
	return nil
}

// TestPeerFileToolsRecordEveryCall: each call, refused or not, writes exactly one record; a refusal is a
// tool error whose text is the session's, with its reason in the record.
func TestPeerFileToolsRecordEveryCall(t *testing.T) {
	rec := &fakeRecorder{}
	sharer := &fakeSharer{}
	share := &ShareFile{Sharer: sharer, Recorder: rec}
	run := func(tool Tool, input string) Result {
		t.Helper()
		res, err := tool.Run(context.Background(), Call{Name: tool.Manifest().Name, Input: json.RawMessage(input), Task: "tsk_1"})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}

	res := run(share, `{"path": 5}`)
	if res.Status != StatusRefused || rec.recs[0].fields["reason"] != "bad_input" || sharer.got != "" {
		t.Errorf("a path that is not text: %+v %v", res, rec.recs)
	}
	sharer.err = &Refusal{Reason: "not_found", Text: "no such file"}
	res = run(share, `{"path": "x"}`)
	if res.Status != StatusRefused || res.Output != "no such file" || sharer.got != "x" {
		t.Errorf("a refusal: %+v", res)
	}
	sharer.err = errors.New("disk on fire")
	res = run(share, `{"path": "x"}`)
	if res.Output != "disk on fire" || rec.recs[2].fields["reason"] != "internal" {
		t.Errorf("an error of no reason: %+v %v", res, rec.recs[2])
	}
	sharer.err = nil
	sharer.file = SharedFile{Handle: "pf1.x", ID: "00", Name: "x", Size: 3, SHA256: "ab", Expires: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	res = run(share, `{"path": "x"}`)
	if res.Status != StatusOK || res.Output != `{"handle":"pf1.x","name":"x","size":3,"sha256":"ab","expires_at":"2026-01-02T03:04:05Z"}` {
		t.Errorf("a handle: %+v", res)
	}

	fetcher := &fakeFetcher{}
	fetch := &FetchPeerFile{Fetcher: fetcher, Recorder: rec}
	res = run(fetch, `{"as": "y"}`)
	if res.Status != StatusRefused || rec.recs[4].fields["reason"] != "bad_input" {
		t.Errorf("no handle: %+v %v", res, rec.recs[4])
	}
	fetcher.file = FetchedFile{From: "lead", Name: "x", Stored: "y", Size: 3, SHA256: "ab", ID: "00"}
	res = run(fetch, `{"handle": "  pf1.x \n", "as": "y", "overwrite": true}`)
	if diff := cmp.Diff(FetchRequest{Handle: "pf1.x", As: "y", Overwrite: true}, fetcher.got); diff != "" {
		t.Errorf("request (-want +got):\n%s", diff)
	}
	if res.Status != StatusOK || res.Output != `{"file":"y","size":3,"sha256":"ab","from":"lead","name":"x"}` {
		t.Errorf("a fetch: %+v", res)
	}
	// A fetch that reached the door and failed ran (it carries the deadline notice); one refused before
	// anything was sent did not. Both are recorded refused.
	for ran, want := range map[bool]string{true: StatusError, false: StatusRefused} {
		fetcher.err = &Refusal{Reason: "changed", Text: "changed at the door", Ran: ran}
		if res = run(fetch, `{"handle": "pf1.x"}`); res.Status != want {
			t.Errorf("a fetch refused with Ran %v: status %s, want %s", ran, res.Status, want)
		}
	}
	var types []string
	for _, r := range rec.recs {
		types = append(types, r.typ+":"+r.fields["status"].(string))
	}
	want := []string{"peer_file_share:refused", "peer_file_share:refused", "peer_file_share:refused", "peer_file_share:ok",
		"peer_file_fetch:refused", "peer_file_fetch:ok", "peer_file_fetch:refused", "peer_file_fetch:refused"}
	if diff := cmp.Diff(want, types); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
}
