package member

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"gopkg.in/yaml.v3"

	"github.com/murmur-run/murmur/internal/peercred"
	"github.com/murmur-run/murmur/member/capsule"
	"github.com/murmur-run/murmur/member/driver"
	"github.com/murmur-run/murmur/member/metrics"
	"github.com/murmur-run/murmur/member/store"
	"github.com/murmur-run/murmur/peerfile"
	"github.com/murmur-run/murmur/roster"
)

const peerSecret = "formation-token-for-peer-files"

var peerEpoch = time.Date(2026, 10, 20, 12, 0, 0, 0, time.UTC)

// peerEnv is one member session of formation "f" (lead, worker), with lead's export root served by a
// stand-in for lead's door that a test can make misbehave.
type peerEnv struct {
	s       *Session
	metrics *metrics.Series
	clock   *clock
	work    string // the session's workdir
	leadOut string // lead's export root, which the stand-in door serves
	door    *httptest.Server
	hits    atomic.Int32
	// serve, when set, answers the door's requests instead of the honest door.
	serve func(w http.ResponseWriter, r *http.Request, h *peerfile.Handle) bool
}

// peerSession starts member as an agent capsule with extra murmur.yaml lines; lead's door is a stand-in
// at its roster URL.
func peerSession(t *testing.T, member, extra string) *peerEnv {
	t.Helper()
	root := t.TempDir()
	e := &peerEnv{clock: &clock{now: peerEpoch}, work: filepath.Join(root, "work"), leadOut: filepath.Join(root, "lead-out")}
	must(t, os.MkdirAll(e.leadOut, 0o755))
	e.door = httptest.NewServer(http.HandlerFunc(e.serveDoor))
	t.Cleanup(e.door.Close)
	for _, n := range []string{"lead", "worker"} {
		must(t, os.MkdirAll(filepath.Join(root, n), 0o755))
		must(t, os.WriteFile(filepath.Join(root, n, "murmur.yaml"), []byte("name: "+n+"\n"), 0o644))
	}
	r, err := roster.Parse(filepath.Join(root, "roster.yaml"), []byte("formation: f\nmembers:\n  - {name: lead, capsule: ./lead, url: '"+e.door.URL+"'}\n  - {name: worker, capsule: ./worker}\n"))
	must(t, err)
	dir := filepath.Join(root, "capsule")
	must(t, os.MkdirAll(dir, 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "script.yaml"), []byte("rules:\n  - match: ''\n    turns:\n      - say: ok\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "murmur.yaml"), []byte(agentCapsule(extra)), 0o644))
	c, err := capsule.Load(dir)
	must(t, err)
	tasks, err := store.Open(filepath.Join(root, "tasks.db"))
	must(t, err)
	e.metrics, err = metrics.New(prometheus.NewRegistry())
	must(t, err)
	e.s, err = Start(Config{Member: member, Formation: "f", Capsule: c, Store: tasks, Metrics: e.metrics,
		RecordsRoot: filepath.Join(root, "records"), WorkDir: e.work, RuntimeRoot: filepath.Join(root, "run"),
		Now: e.clock.Now, Roster: r, FormationToken: peerSecret})
	must(t, err)
	t.Cleanup(func() {
		e.s.Close(context.Background())
		tasks.Close()
	})
	return e
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// serveDoor is lead's door as the server package serves it, reduced to what the fetcher relies on.
func (e *peerEnv) serveDoor(w http.ResponseWriter, r *http.Request) {
	e.hits.Add(1)
	h, err := peerfile.Decode(strings.TrimPrefix(r.URL.Path, "/peer-files/"))
	// The fetcher presents its own peer credential, never the formation secret.
	_, credErr := peercred.NewKey(peerSecret, "f").Verify(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
	if credErr != nil || err != nil {
		http.Error(w, "no", http.StatusForbidden)
		return
	}
	if e.serve != nil && e.serve(w, r, h) {
		return
	}
	f, err := peerfile.Open(e.leadRoot(), h.File)
	if err != nil {
		w.WriteHeader(peerfile.Status(err))
		json.NewEncoder(w).Encode(map[string]string{"reason": peerfile.Reason(err)})
		return
	}
	defer f.Close()
	w.Header().Set(peerfile.DigestHeader, peerfile.FormatDigest(h.Digest))
	buf := make([]byte, h.Size)
	f.Read(buf)
	w.Write(buf)
}

// leadRoot is lead's export root as a door opens it.
func (e *peerEnv) leadRoot() peerfile.Root {
	return peerfile.Root{Workdir: filepath.Dir(e.leadOut), Dir: filepath.Base(e.leadOut)}
}

// share writes name under lead's export root and mints lead's handle for it, valid for an hour.
func (e *peerEnv) share(t *testing.T, name, content string) *peerfile.Handle {
	t.Helper()
	p := filepath.Join(e.leadOut, name)
	must(t, os.MkdirAll(filepath.Dir(p), 0o755))
	must(t, os.WriteFile(p, []byte(content), 0o644))
	f, err := peerfile.Inspect(e.leadRoot(), name)
	must(t, err)
	return peerfile.Mint(peerSecret, "f", "lead", f, e.clock.Now().Add(time.Hour))
}

// call dispatches one tool call as the agent loop does, and returns what the model was sent and the
// call's last record.
func (e *peerEnv) call(t *testing.T, tool string, input map[string]any) (driver.ToolResult, map[string]any) {
	t.Helper()
	in, _ := json.Marshal(input)
	res := e.s.dispatch(context.Background(), "tsk_test", driver.ToolCall{ID: "c1", Name: tool, Input: in})
	recs := readTrace(t, e.s)
	// The tool's own record; a call that ran is followed by its tool_call record.
	for i := len(recs) - 1; i >= 0; i-- {
		if recs[i]["type"] != "tool_call" {
			return res, recs[i]
		}
	}
	t.Fatal("no record")
	return res, nil
}

// files lists every file under dir, relative to it, with its content.
func files(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			b, _ := os.ReadFile(p)
			rel, _ := filepath.Rel(dir, p)
			out[rel] = string(b)
		}
		return nil
	})
	return out
}

func TestPeerFileToolsAreStagedOnlyWhenGranted(t *testing.T) {
	for _, tc := range []struct {
		extra string
		want  []string
	}{
		{"", []string{"session-status"}},
		{"exports: {peer_files: out}\n", []string{"session-status", "share-file"}},
		{"capabilities: {peer_fetch: true}\n", []string{"session-status", "fetch-peer-file"}},
		{"exports: {peer_files: {root: out, ttl: 2h}}\ncapabilities: {peer_fetch: {max_mb: 3}}\n", []string{"session-status", "share-file", "fetch-peer-file"}},
	} {
		e := peerSession(t, "lead", tc.extra)
		if diff := cmp.Diff(tc.want, e.s.tools.Names()); diff != "" {
			t.Errorf("%q: staged tools (-want +got):\n%s", tc.extra, diff)
		}
		for _, name := range []string{"share-file", "fetch-peer-file"} {
			manifest := filepath.Join(filepath.Dir(e.work), "run", e.s.ID(), "tools", name, "murmur.yaml")
			_, err := os.Stat(manifest)
			if staged := strings.Contains(strings.Join(tc.want, ","), name); staged != (err == nil) {
				t.Errorf("%q: %s manifest written %v, want %v", tc.extra, name, err == nil, staged)
			}
			if err == nil {
				var m map[string]any
				b, _ := os.ReadFile(manifest)
				yaml.Unmarshal(b, &m)
				if m["version"] != "0.0.0" || m["implementation"] != "native" || m["runtime"] != "tool" {
					t.Errorf("%s manifest %v", name, m)
				}
			}
		}
		if strings.Contains(tc.extra, "ttl: 2h") {
			share, _ := e.s.tools.Lookup("share-file")
			fetch, _ := e.s.tools.Lookup("fetch-peer-file")
			if d := share.Manifest().Description; !strings.Contains(d, "(out)") || !strings.Contains(d, "for 2h0m0s") {
				t.Errorf("share-file description does not name the root and the lifetime: %s", d)
			}
			if d := fetch.Manifest().Description; !strings.Contains(d, "larger than 3 MiB are refused") {
				t.Errorf("fetch-peer-file description does not name the limit: %s", d)
			}
			if fi, err := os.Stat(filepath.Join(e.work, "out")); err != nil || !fi.IsDir() {
				t.Errorf("the export root was not made at staging: %v", err)
			}
		}
		if tc.extra == "" {
			for name, decl := range map[string]string{"share-file": "exports.peer_files", "fetch-peer-file": "capabilities.peer_fetch"} {
				res, _ := e.call(t, name, map[string]any{"path": "a"})
				want := name + " is not available in this session: it exists only when the capsule declares " + decl + ", and this capsule does not."
				if res.Status != "refused" || res.Output != want {
					t.Errorf("%s without its grant: %s %q", name, res.Status, res.Output)
				}
			}
		}
	}
}

func TestShareFile(t *testing.T) {
	e := peerSession(t, "lead", "exports: {peer_files: {root: out, ttl: 2h}}\n")
	out := filepath.Join(e.work, "out")
	must(t, os.WriteFile(filepath.Join(out, "report.txt"), []byte("the report\n"), 0o644))
	res, rec := e.call(t, "share-file", map[string]any{"path": "report.txt"})
	if res.Status != "ok" {
		t.Fatalf("share-file: %s %s", res.Status, res.Output)
	}
	data := res.Data.(map[string]any)
	handle := data["handle"].(string)
	h, err := peerfile.Decode(handle)
	must(t, err)
	must(t, h.Verify(peerSecret))
	sum := sha256.Sum256([]byte("the report\n"))
	digest := hex.EncodeToString(sum[:])
	expires := "2026-10-20T14:00:00Z"
	if h.Formation != "f" || h.Member != "lead" || h.Path != "report.txt" || h.Size != 11 || h.Digest != sum ||
		h.ExpiresAt().Format(time.RFC3339) != expires {
		t.Errorf("handle %+v", h)
	}
	wantText := "<untrusted-content source=tool:share-file>\n" +
		`{"handle":"` + handle + `","name":"report.txt","size":11,"sha256":"` + digest + `","expires_at":"` + expires + `"}` + "\n" +
		"</untrusted-content>\n" +
		"[share-file] The handle is for members of this formation only: send it, exactly as written, in the task text of call-member, and the member stores report.txt (11 bytes, sha256 " + digest + ") in its own workdir with fetch-peer-file. It works until " + expires + ", and only while report.txt stays as it is now: if the file changes, share it again."
	if res.Text != wantText {
		t.Errorf("the model was sent:\n%s\nwant:\n%s", res.Text, wantText)
	}
	wantRec := map[string]any{"type": "peer_file_share", "status": "ok", "path": "report.txt", "size": 11.0, "sha256": digest,
		"handle_id": h.ID(), "expires": expires, "task": "tsk_test"}
	for k, v := range wantRec {
		if rec[k] != v {
			t.Errorf("record %s = %v, want %v", k, rec[k], v)
		}
	}
	if strings.Contains(strings.Join(mapValues(rec), " "), handle) {
		t.Error("the record repeats the handle")
	}
	if n := testutil.ToFloat64(e.metrics.ToolCalls.WithLabelValues("share-file", "ok")); n != 1 {
		t.Errorf("mur_tool_calls_total{tool=share-file,status=ok} = %v", n)
	}
}

func mapValues(m map[string]any) []string {
	var out []string
	for _, v := range m {
		if s, ok := v.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func TestShareFileRefusals(t *testing.T) {
	e := peerSession(t, "lead", "exports: {peer_files: out}\n")
	out := filepath.Join(e.work, "out")
	must(t, os.WriteFile(filepath.Join(e.work, "secret.txt"), []byte("not shared"), 0o644))
	must(t, os.Mkdir(filepath.Join(out, "dir"), 0o755))
	must(t, os.Symlink("../secret.txt", filepath.Join(out, "escape")))
	must(t, os.Symlink("loop", filepath.Join(out, "loop")))
	must(t, syscall.Mkfifo(filepath.Join(out, "pipe"), 0o644))
	hint := " Give the path of a file inside the export root out, relative to it, such as report.txt."
	for _, tc := range []struct {
		input  map[string]any
		reason string
		text   string
	}{
		{map[string]any{"path": "../secret.txt"}, "bad_path", `'share-file' refused: "../secret.txt" climbs out of its root with ".."` + "." + hint},
		{map[string]any{"path": "a/../../secret.txt"}, "bad_path", `'share-file' refused: "a/../../secret.txt" climbs out of its root with ".."` + "." + hint},
		{map[string]any{"path": "/etc/passwd"}, "bad_path", `'share-file' refused: "/etc/passwd" is an absolute path.` + hint},
		{map[string]any{"path": ""}, "bad_path", `'share-file' refused: the path is empty.` + hint},
		{map[string]any{"path": "a\x00b"}, "bad_path", `'share-file' refused: the path "a\x00b" holds a NUL byte.` + hint},
		{map[string]any{"path": "missing.txt"}, "not_found", `'share-file' refused: there is no file "missing.txt" under the export root.` + hint},
		{map[string]any{"path": "escape"}, "symlink", `'share-file' refused: "escape" is reached through the symbolic link out/escape, and the runtime follows no symbolic link inside the workdir. Only files inside the export root out can be shared, and it must be a directory, not a link: remove the link, make out a directory again and copy the file itself into it.`},
		{map[string]any{"path": "loop"}, "symlink", `'share-file' refused: "loop" is reached through the symbolic link out/loop, and the runtime follows no symbolic link inside the workdir. Only files inside the export root out can be shared, and it must be a directory, not a link: remove the link, make out a directory again and copy the file itself into it.`},
		{map[string]any{"path": "pipe"}, "not_regular", `'share-file' refused: "pipe" is a named pipe (FIFO), not a regular file. share-file shares one regular file per call.`},
		{map[string]any{"path": "dir"}, "not_regular", `'share-file' refused: "dir" is a directory, not a regular file. share-file shares one regular file per call.`},
		{map[string]any{"file": "x"}, "bad_input", `'share-file' needs {"path": "<file under the export root>"}.`},
	} {
		res, rec := e.call(t, "share-file", tc.input)
		if res.Status != "refused" || res.Output != tc.text {
			t.Errorf("%v: %s %q\nwant %q", tc.input, res.Status, res.Output, tc.text)
		}
		if rec["type"] != "peer_file_share" || rec["status"] != "refused" || rec["reason"] != tc.reason || rec["message"] != tc.text {
			t.Errorf("%v: record %v", tc.input, rec)
		}
	}
	if n := testutil.ToFloat64(e.metrics.ToolCalls.WithLabelValues("share-file", "refused")); n != 11 {
		t.Errorf("mur_tool_calls_total{tool=share-file,status=refused} = %v, want 11", n)
	}
}

func TestShareFileOutsideAFormation(t *testing.T) {
	s, _ := startSession(t, map[string]string{"murmur.yaml": agentCapsule("exports: {peer_files: out}\n"),
		"script.yaml": "rules:\n  - match: ''\n    turns:\n      - call: [{tool: share-file, input: {path: a.txt}}]\n      - say: '{{(index .results 0).output}}'\n"}, sessionOpts{})
	if got := answer(s.run(t, "share", Origin{})); got != "'share-file' mints handles only for a member of a formation, and this session is in none: no peer could redeem one." {
		t.Errorf("share-file outside a formation: %q", got)
	}
}

func TestFetchPeerFile(t *testing.T) {
	e := peerSession(t, "worker", "capabilities: {peer_fetch: true, network: {allow: [localhost]}}\n")
	h := e.share(t, "reports/q3.csv", "a,b\n1,2\n")
	res, rec := e.call(t, "fetch-peer-file", map[string]any{"handle": h.String()})
	if res.Status != "ok" {
		t.Fatalf("fetch: %s %s", res.Status, res.Output)
	}
	digest := hex.EncodeToString(h.Digest[:])
	want := "<untrusted-content source=tool:fetch-peer-file>\n" +
		`{"file":"q3.csv","size":8,"sha256":"` + digest + `","from":"lead","name":"reports/q3.csv"}` + "\n" +
		"</untrusted-content>\n" +
		"[fetch-peer-file] reports/q3.csv from lead is now in your workdir at q3.csv: 8 bytes, and its SHA-256 matches the handle."
	if res.Text != want {
		t.Errorf("the model was sent:\n%s\nwant:\n%s", res.Text, want)
	}
	if diff := cmp.Diff(map[string]string{"q3.csv": "a,b\n1,2\n"}, files(t, e.work)); diff != "" {
		t.Errorf("workdir (-want +got):\n%s", diff)
	}
	for k, v := range map[string]any{"type": "peer_file_fetch", "status": "ok", "from": "lead", "path": "reports/q3.csv", "stored": "q3.csv",
		"size": 8.0, "sha256": digest, "handle_id": h.ID(), "replaced": false} {
		if rec[k] != v {
			t.Errorf("record %s = %v, want %v", k, rec[k], v)
		}
	}
	if strings.Contains(res.Text, e.door.URL) || strings.Contains(res.Text, peerSecret) {
		t.Error("the model saw the door or the token")
	}

	// as, into a directory that does not exist yet; then the same name again: refused, then replaced.
	res, _ = e.call(t, "fetch-peer-file", map[string]any{"handle": h.String(), "as": "in/data.csv"})
	if res.Status != "ok" || files(t, e.work)["in/data.csv"] != "a,b\n1,2\n" {
		t.Errorf("fetch as in/data.csv: %s %s", res.Status, res.Output)
	}
	must(t, os.WriteFile(filepath.Join(e.work, "in", "data.csv"), []byte("mine"), 0o644))
	res, rec = e.call(t, "fetch-peer-file", map[string]any{"handle": h.String(), "as": "in/data.csv"})
	if res.Status != "refused" || res.Output != `'fetch-peer-file' refused: in/data.csv already exists in your workdir, so nothing was stored. Pass "as" with another name, or "overwrite": true to replace it.` ||
		rec["reason"] != "target_exists" || files(t, e.work)["in/data.csv"] != "mine" {
		t.Errorf("fetch over an existing file: %s %q %v", res.Status, res.Output, rec["reason"])
	}
	res, rec = e.call(t, "fetch-peer-file", map[string]any{"handle": h.String(), "as": "in/data.csv", "overwrite": true})
	if res.Status != "ok" || !strings.HasSuffix(res.Text, "It replaced the file that was there.") || rec["replaced"] != true ||
		files(t, e.work)["in/data.csv"] != "a,b\n1,2\n" {
		t.Errorf("fetch with overwrite: %s %q %v", res.Status, res.Text, rec)
	}
	if n := testutil.ToFloat64(e.metrics.ToolCalls.WithLabelValues("fetch-peer-file", "ok")); n != 3 {
		t.Errorf("mur_tool_calls_total{tool=fetch-peer-file,status=ok} = %v, want 3", n)
	}
	if n := testutil.ToFloat64(e.metrics.ToolCalls.WithLabelValues("fetch-peer-file", "refused")); n != 1 {
		t.Errorf("mur_tool_calls_total{tool=fetch-peer-file,status=refused} = %v, want 1", n)
	}
}

// TestFetchPeerFileRefusals: each refusal's text and record reason, nothing stored, no temporary file
// left, and no request sent for what the fetcher can tell by itself.
func TestFetchPeerFileRefusals(t *testing.T) {
	type env = peerEnv
	other := func(e *env) string {
		f, _ := peerfile.Inspect(e.leadRoot(), "r.txt")
		return peerfile.Mint("another-secret", "g", "lead", f, peerEpoch.Add(time.Hour)).String()
	}
	for _, tc := range []struct {
		name    string
		extra   string
		handle  func(e *env, h *peerfile.Handle) string
		input   map[string]any
		setup   func(t *testing.T, e *env)
		reason  string
		text    string
		request bool // whether the door was asked
	}{
		{name: "malformed", handle: func(*env, *peerfile.Handle) string { return "see the attached file" }, reason: "malformed",
			text: `'fetch-peer-file' refused: "see the attached file" is not a peer-file handle: a handle starts with pf1.. Copy the handle exactly as the member sent it: it starts with pf1. and has no spaces or line breaks.`},
		{name: "cut short", handle: func(_ *env, h *peerfile.Handle) string { return h.String()[:40] }, reason: "malformed"},
		{name: "flipped byte", handle: func(_ *env, h *peerfile.Handle) string {
			s := []byte(h.String()) // a character inside the MAC: the handle still decodes
			if s[len(s)-3] == 'A' {
				s[len(s)-3] = 'B'
			} else {
				s[len(s)-3] = 'A'
			}
			return string(s)
		}, reason: "forged",
			text: `'fetch-peer-file' refused: the handle's signature does not match, so it was altered or mistyped on its way. Copy it exactly as lead sent it, or ask lead to share the file again.`},
		{name: "another formation", handle: func(e *env, _ *peerfile.Handle) string { return other(e) }, reason: "wrong_formation",
			text: `'fetch-peer-file' refused: the handle was minted in formation "g", and this member is in formation "f": a handle works only inside the formation that minted it. Ask a member of this formation to share the file.`},
		{name: "unknown member", handle: func(e *env, h *peerfile.Handle) string {
			return peerfile.Mint(peerSecret, "f", "ghost", h.File, peerEpoch.Add(time.Hour)).String()
		}, reason: "unknown_member",
			text: `'fetch-peer-file' refused: the handle names member "ghost", which is not in this formation's roster. Copy the handle exactly as the member sent it.`},
		{name: "expired", setup: func(_ *testing.T, e *env) { e.clock.advance(time.Hour) }, reason: "expired",
			text: `'fetch-peer-file' refused: the handle for r.txt expired at 2026-10-20T13:00:00Z. Ask lead to share the file again.`},
		{name: "too large", extra: "  peer_fetch: {max_mb: 1}\n", handle: func(e *env, h *peerfile.Handle) string {
			big := h.File
			big.Size = 1<<20 + 1
			return peerfile.Mint(peerSecret, "f", "lead", big, peerEpoch.Add(time.Hour)).String()
		}, reason: "too_large",
			text: `'fetch-peer-file' refused: r.txt is 1048577 bytes, more than the 1 MiB this capsule may fetch (capabilities.peer_fetch.max_mb), so nothing was fetched.`},
		{name: "as climbs out", input: map[string]any{"as": "../x"}, reason: "bad_target",
			text: `'fetch-peer-file' refused: "../x" climbs out of its root with "..". Give "as" a name relative to your workdir, such as report.txt.`},
		{name: "as through a/../..", input: map[string]any{"as": "a/../../x"}, reason: "bad_target"},
		{name: "as absolute", input: map[string]any{"as": "/tmp/x"}, reason: "bad_target"},
		{name: "as with NUL", input: map[string]any{"as": "x\x00"}, reason: "bad_target"},
		{name: "as through a symlink out", input: map[string]any{"as": "esc/x"}, setup: func(t *testing.T, e *env) {
			must(t, os.Symlink(t.TempDir(), filepath.Join(e.work, "esc")))
		}, reason: "bad_target",
			text: `'fetch-peer-file' refused: esc/x cannot be written inside your workdir: esc is a symbolic link, and the runtime follows none inside the workdir. Give "as" another name.`},
		{name: "as through a symlink inside", input: map[string]any{"as": "in/x"}, setup: func(t *testing.T, e *env) {
			must(t, os.Mkdir(filepath.Join(e.work, "real"), 0o755))
			must(t, os.Symlink("real", filepath.Join(e.work, "in")))
		}, reason: "bad_target",
			text: `'fetch-peer-file' refused: in/x cannot be written inside your workdir: in is a symbolic link, and the runtime follows none inside the workdir. Give "as" another name.`},
		{name: "a directory in the way", input: map[string]any{"overwrite": true}, setup: func(t *testing.T, e *env) {
			must(t, os.Mkdir(filepath.Join(e.work, "r.txt"), 0o755))
		}, reason: "target_exists",
			text: `'fetch-peer-file' refused: r.txt is a directory in your workdir, so nothing was stored. Pass "as" with the name of a file, such as r.txt/r.txt.`},
		{name: "no egress", extra: "  network: {allow: [example.org]}\n", reason: "egress",
			text: `'fetch-peer-file' refused: lead's door is outside this capsule's capabilities.network.allow, so nothing was fetched; the operator must add localhost (or lead's host) to it.`},
		{name: "door sends other bytes", request: true, setup: func(_ *testing.T, e *env) {
			e.serve = func(w http.ResponseWriter, _ *http.Request, h *peerfile.Handle) bool {
				w.Write([]byte(strings.Repeat("x", int(h.Size))))
				return true
			}
		}, reason: "digest_mismatch",
			text: `'fetch-peer-file' refused: the bytes lead's door sent do not match the handle (their SHA-256 is ` + hex.EncodeToString(func() []byte { s := sha256.Sum256([]byte("xxxxx")); return s[:] }()) + `), so nothing was stored. Try again, or ask lead to share the file again.`},
		{name: "door sends too many bytes", request: true, setup: func(_ *testing.T, e *env) {
			e.serve = func(w http.ResponseWriter, _ *http.Request, h *peerfile.Handle) bool {
				w.Header().Set("Content-Length", "6")
				w.Write([]byte("hello!"))
				return true
			}
		}, reason: "digest_mismatch"},
		{name: "door streams past the handle's size", request: true, setup: func(_ *testing.T, e *env) {
			e.serve = func(w http.ResponseWriter, _ *http.Request, h *peerfile.Handle) bool {
				w.(http.Flusher).Flush() // chunked: no Content-Length to check first
				w.Write([]byte("hello, and more"))
				return true
			}
		}, reason: "digest_mismatch",
			text: `'fetch-peer-file' refused: the bytes lead's door sent do not match the handle (6 bytes arrived, not 5), so nothing was stored. Try again, or ask lead to share the file again.`},
		{name: "door names another digest", request: true, setup: func(_ *testing.T, e *env) {
			e.serve = func(w http.ResponseWriter, _ *http.Request, h *peerfile.Handle) bool {
				w.Header().Set(peerfile.DigestHeader, peerfile.FormatDigest(sha256.Sum256([]byte("other"))))
				w.Write([]byte("hello"))
				return true
			}
		}, reason: "digest_mismatch",
			text: `'fetch-peer-file' refused: lead's door offered other bytes than the handle names (its size or SHA-256 differ), so nothing was stored. Ask lead to share the file again.`},
		{name: "file changed at the door", request: true, setup: func(t *testing.T, e *env) {
			must(t, os.WriteFile(filepath.Join(e.leadOut, "r.txt"), []byte("HELLO, grown"), 0o644))
		}, reason: "changed",
			text: `'fetch-peer-file' refused: r.txt changed on lead's side after the handle was minted, so its door did not send it. Ask lead to share it again.`},
		{name: "file gone at the door", request: true, setup: func(t *testing.T, e *env) {
			must(t, os.Remove(filepath.Join(e.leadOut, "r.txt")))
		}, reason: "not_found",
			text: `'fetch-peer-file' refused: lead no longer has r.txt under its export root: it was renamed or deleted after the handle was minted. Ask lead to share it again.`},
		{name: "door says expired", request: true, setup: func(_ *testing.T, e *env) {
			e.serve = func(w http.ResponseWriter, _ *http.Request, _ *peerfile.Handle) bool {
				w.WriteHeader(http.StatusGone)
				w.Write([]byte(`{"reason":"expired","message":"x"}`))
				return true
			}
		}, reason: "expired",
			text: `'fetch-peer-file' refused: lead's door says the handle for r.txt has expired. Ask lead to share the file again.`},
		{name: "door answers nonsense", request: true, setup: func(_ *testing.T, e *env) {
			e.serve = func(w http.ResponseWriter, _ *http.Request, _ *peerfile.Handle) bool {
				http.Error(w, "teapot", http.StatusTeapot)
				return true
			}
		}, reason: "door_error",
			text: `'fetch-peer-file' refused: lead's door answered with HTTP status 418, so nothing was stored. Try again in a moment.`},
		{name: "door unreachable", setup: func(_ *testing.T, e *env) { e.door.Close() }, reason: "unreachable",
			text: `'fetch-peer-file' refused: lead's door could not be reached, so nothing was stored. Try again in a moment.`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := peerSession(t, "worker", "capabilities:\n  peer_fetch: true\n  network: {allow: [localhost]}\n")
			if tc.extra != "" {
				e = peerSession(t, "worker", "capabilities:\n"+tc.extra+map[bool]string{true: "  peer_fetch: true\n", false: ""}[!strings.Contains(tc.extra, "peer_fetch")]+
					map[bool]string{true: "  network: {allow: [localhost]}\n", false: ""}[!strings.Contains(tc.extra, "network")])
			}
			h := e.share(t, "r.txt", "hello")
			if tc.setup != nil {
				tc.setup(t, e)
			}
			input := map[string]any{"handle": h.String()}
			if tc.handle != nil {
				input["handle"] = tc.handle(e, h)
			}
			for k, v := range tc.input {
				input[k] = v
			}
			before := files(t, e.work)
			res, rec := e.call(t, "fetch-peer-file", input)
			// A fetch that asked the door (or tried to reach it) ran and failed; one refused before that
			// was refused.
			wantStatus := "refused"
			if tc.request || tc.reason == "unreachable" {
				wantStatus = "error"
			}
			if res.Status != wantStatus || (tc.text != "" && res.Output != tc.text) {
				t.Errorf("%s %q\nwant %s %q", res.Status, res.Output, wantStatus, tc.text)
			}
			if rec["type"] != "peer_file_fetch" || rec["status"] != "refused" || rec["reason"] != tc.reason || rec["message"] != res.Output {
				t.Errorf("record %v, want reason %s", rec, tc.reason)
			}
			if diff := cmp.Diff(before, files(t, e.work)); diff != "" {
				t.Errorf("the workdir changed (-before +after):\n%s", diff)
			}
			if asked := e.hits.Load() > 0; asked != tc.request {
				t.Errorf("the door was asked: %v, want %v", asked, tc.request)
			}
			if strings.Contains(res.Text, strings.TrimPrefix(e.door.URL, "http://")) || strings.Contains(res.Text, peerSecret) {
				t.Error("the model saw the door's address or the token")
			}
		})
	}
}

// TestFetchPeerFileRacesATarget: a file that appears at the target name while the bytes are on their way
// is never replaced without overwrite.
func TestFetchPeerFileRacesATarget(t *testing.T) {
	e := peerSession(t, "worker", "capabilities: {peer_fetch: true, network: {allow: [localhost]}}\n")
	h := e.share(t, "r.txt", "hello")
	e.serve = func(w http.ResponseWriter, _ *http.Request, h *peerfile.Handle) bool {
		os.WriteFile(filepath.Join(e.work, "r.txt"), []byte("theirs"), 0o644)
		w.Write([]byte("hello"))
		return true
	}
	res, rec := e.call(t, "fetch-peer-file", map[string]any{"handle": h.String()})
	if res.Status != "error" || rec["reason"] != "target_exists" {
		t.Errorf("%s %q %v", res.Status, res.Output, rec["reason"])
	}
	if diff := cmp.Diff(map[string]string{"r.txt": "theirs"}, files(t, e.work)); diff != "" {
		t.Errorf("workdir (-want +got):\n%s", diff)
	}
}

func TestFetchPeerFileBadInput(t *testing.T) {
	e := peerSession(t, "worker", "capabilities: {peer_fetch: true, network: {allow: [localhost]}}\n")
	res, rec := e.call(t, "fetch-peer-file", map[string]any{"as": "x"})
	want := `'fetch-peer-file' needs {"handle": "pf1.…"}, with "as": "<name>" and "overwrite": true optional.`
	if res.Status != "refused" || res.Output != want || rec["reason"] != "bad_input" {
		t.Errorf("%s %q %v", res.Status, res.Output, rec)
	}
	if !errors.Is(peerfile.FromReason("target_exists"), peerfile.ErrTargetExists) {
		t.Error("the wire table lost target_exists")
	}
}
