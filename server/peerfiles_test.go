package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/peercred"
	"github.com/murmur-run/murmur/peerfile"
	"github.com/murmur-run/murmur/runtimetools"
)

// testClock is a clock a test moves by hand.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

const peerTokens = "op-peer"

// peerFormation starts lead (an agent exporting out/) and worker (an agent that may fetch), on the clock.
func peerFormation(t *testing.T, clock *testClock, files map[string]string) *formationFixture {
	t.Helper()
	all := map[string]string{
		"roster.yaml":        "formation: f\nmembers:\n  - {name: lead, capsule: ./lead, listen: '127.0.0.1:0'}\n  - {name: worker, capsule: ./worker, listen: '127.0.0.1:0'}\nreach:\n  - {from: lead, to: [worker]}\n",
		"lead/murmur.yaml":   agentOf("lead") + "exports: {peer_files: out}\n",
		"lead/script.yaml":   "rules:\n  - match: ''\n    turns:\n      - say: ok\n",
		"worker/murmur.yaml": strings.Replace(agentOf("worker"), "network:", "peer_fetch: true, network:", 1),
		"worker/script.yaml": "rules:\n  - match: ''\n    turns:\n      - say: ok\n",
	}
	for k, v := range files {
		all[k] = v
	}
	return startFormationAt(t, all, Tokens{Operator: peerTokens, Formation: "fm-peer"}, clock.Now)
}

func (fx *formationFixture) member(name string) *RunningMember {
	for _, m := range fx.f.Members {
		if m.Name == name {
			return m
		}
	}
	return nil
}

// workdir is a member's workdir under the formation's data directory.
func (fx *formationFixture) workdir(name string) string {
	return filepath.Join(fx.root, "data", "members", name, "work")
}

// get redeems a handle at a member's door with a token ("" for none).
func get(t *testing.T, doorURL, handle, token string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, doorURL+"/peer-files/"+handle, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func reasonOf(b []byte) string {
	var body struct{ Reason, Message string }
	json.Unmarshal(b, &body)
	return body.Reason
}

func TestPeerFileDoor(t *testing.T) {
	clock := &testClock{now: time.Date(2026, 10, 20, 12, 0, 0, 0, time.UTC)}
	fx := peerFormation(t, clock, nil)
	lead, worker := fx.member("lead"), fx.member("worker")
	out := filepath.Join(fx.workdir("lead"), "out")
	content := make([]byte, 100<<10)
	rand.Read(content)
	if err := os.WriteFile(filepath.Join(out, "data.bin"), content, 0o644); err != nil {
		t.Fatal(err)
	}
	share := func(t *testing.T, path string) *peerfile.Handle {
		t.Helper()
		sf, err := lead.Session.PeerFiles().ShareFile(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		h, err := peerfile.Decode(sf.Handle)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	h := share(t, "data.bin")
	const secret = "fm-peer"
	key := peercred.NewKey(secret, "f")
	fm := key.Credential("worker", peercred.Untrusted) // what worker presents

	t.Run("the file and its digest", func(t *testing.T) {
		resp, b := get(t, lead.URL, h.String(), fm)
		sum := sha256.Sum256(content)
		if resp.StatusCode != 200 || !bytes.Equal(b, content) {
			t.Fatalf("status %d, %d bytes, want 200 and the %d shared", resp.StatusCode, len(b), len(content))
		}
		if got := resp.Header.Get("Repr-Digest"); got != peerfile.FormatDigest(sum) {
			t.Errorf("Repr-Digest %q", got)
		}
		if resp.Header.Get("Content-Length") != strconv.Itoa(len(content)) || resp.Header.Get("Content-Type") != "application/octet-stream" {
			t.Errorf("headers %v", resp.Header)
		}
	})

	other := peerfile.Mint("another-secret", "g", "lead", h.File, clock.Now().Add(time.Hour))
	sameNameOtherSecret := peerfile.Mint("another-secret", "f", "lead", h.File, clock.Now().Add(time.Hour))
	byWorker := peerfile.Mint(secret, "f", "worker", h.File, clock.Now().Add(time.Hour))
	for _, tc := range []struct {
		name, door, handle, token string
		status                    int
		reason                    string
	}{
		{"no token", lead.URL, h.String(), "", 401, "unauthenticated"},
		{"a wrong token", lead.URL, h.String(), "guess", 401, "unauthenticated"},
		{"the operator token", lead.URL, h.String(), peerTokens, 403, "forbidden"},
		{"the bare formation token", lead.URL, h.String(), secret, 401, "unauthenticated"},
		{"a credential from another secret", lead.URL, h.String(), peercred.NewKey("another-secret", "f").Credential("worker", peercred.Untrusted), 401, "unauthenticated"},
		{"the credential of a non-member", lead.URL, h.String(), key.Credential("mallory", peercred.Trusted), 403, "forbidden"},
		{"not a handle", lead.URL, "hello", fm, 400, "malformed"},
		{"a handle cut short", lead.URL, h.String()[:50], fm, 400, "malformed"},
		{"another formation", lead.URL, other.String(), fm, 403, "wrong_formation"},
		{"another secret", lead.URL, sameNameOtherSecret.String(), fm, 403, "forged"},
		{"another member's handle", lead.URL, byWorker.String(), fm, 404, "wrong_member"},
		{"a member that exports nothing", worker.URL, byWorker.String(), fm, 404, "not_exported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, b := get(t, tc.door, tc.handle, tc.token)
			if resp.StatusCode != tc.status || reasonOf(b) != tc.reason || resp.Header.Get("Content-Type") != "application/json" {
				t.Errorf("status %d %s, want %d %s", resp.StatusCode, b, tc.status, tc.reason)
			}
			if tc.status == 401 && resp.Header.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
		})
	}

	t.Run("every altered character", func(t *testing.T) {
		s := h.String()
		for i := len(peerfile.Prefix); i < len(s); i++ {
			c := byte('A')
			if s[i] == 'A' {
				c = 'B'
			}
			alt := s[:i] + string(c) + s[i+1:]
			resp, b := get(t, lead.URL, alt, fm)
			if resp.StatusCode == 200 {
				t.Errorf("character %d altered: the door sent the file", i)
			} else if r := reasonOf(b); r != "forged" && r != "malformed" && r != "wrong_formation" && r != "wrong_member" {
				t.Errorf("character %d altered: %d %s", i, resp.StatusCode, b)
			}
		}
	})

	t.Run("the file changed", func(t *testing.T) {
		for _, tc := range []struct {
			name   string
			change func(p string)
			status int
			reason string
		}{
			{"grown", func(p string) { f, _ := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0); f.Write([]byte("!")); f.Close() }, 409, "changed"},
			{"rewritten in place", func(p string) {
				fi, _ := os.Stat(p)
				os.WriteFile(p, []byte("HELLO"), 0o644)
				os.Chtimes(p, fi.ModTime(), fi.ModTime())
			}, 409, "changed"},
			{"a symlink out of the root", func(p string) { os.Remove(p); os.Symlink("../../tasks.db", p) }, 409, "changed"},
			{"a FIFO", func(p string) { os.Remove(p); syscall.Mkfifo(p, 0o644) }, 409, "changed"},
			{"a directory", func(p string) { os.Remove(p); os.Mkdir(p, 0o755) }, 409, "changed"},
			{"renamed", func(p string) { os.Rename(p, p+".old") }, 404, "not_found"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				p := filepath.Join(out, "swap-"+strings.ReplaceAll(tc.name, " ", "-"))
				os.WriteFile(p, []byte("hello"), 0o644)
				os.Chtimes(p, time.Now().Add(-time.Hour), time.Now().Add(-time.Hour))
				h := share(t, filepath.Base(p))
				tc.change(p)
				resp, b := get(t, lead.URL, h.String(), fm)
				if resp.StatusCode != tc.status || reasonOf(b) != tc.reason {
					t.Errorf("status %d %s, want %d %s", resp.StatusCode, b, tc.status, tc.reason)
				}
			})
		}
	})

	t.Run("expired on the formation's clock", func(t *testing.T) {
		clock.advance(time.Hour - time.Second)
		if resp, _ := get(t, lead.URL, h.String(), fm); resp.StatusCode != 200 {
			t.Errorf("a second before expiry: %d", resp.StatusCode)
		}
		clock.advance(time.Second)
		resp, b := get(t, lead.URL, h.String(), fm)
		if resp.StatusCode != http.StatusGone || reasonOf(b) != "expired" {
			t.Errorf("at expiry: %d %s", resp.StatusCode, b)
		}
	})
}

// TestPeerFilesBetweenMembers: lead's model shares a file and hands the handle to worker with
// call-member; worker's model fetches it through lead's real door; the bytes match, and neither model
// sees a door's address or the formation token.
func TestPeerFilesBetweenMembers(t *testing.T) {
	clock := &testClock{now: time.Now()}
	fx := peerFormation(t, clock, map[string]string{
		"lead/script.yaml": "rules:\n  - match: '^share (?P<p>\\S+)$'\n    turns:\n" +
			"      - call: [{tool: share-file, input: {path: '{{.p}}'}}]\n" +
			"      - call: [{tool: call-member, input: {member: worker, task: 'please fetch {{(index .results 0).data.handle}}'}}]\n" +
			"      - say: waiting\n" +
			"      - say: '{{.transcript}}'\n",
		"worker/script.yaml": "rules:\n  - match: '(?P<h>pf1\\.[A-Za-z0-9_-]+)'\n    turns:\n" +
			"      - call: [{tool: fetch-peer-file, input: {handle: '{{.h}}', as: inbox/report.bin}}]\n" +
			"      - say: '{{(index .results 0).text}}'\n",
	})
	content := make([]byte, 300<<10)
	rand.Read(content)
	if err := os.WriteFile(filepath.Join(fx.workdir("lead"), "out", "report.bin"), content, 0o644); err != nil {
		t.Fatal(err)
	}
	task := fx.ask(t, "lead", "share report.bin")
	transcript := answerOf(task)
	if task.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("lead's task %s: %s", task.Status.State, transcript)
	}
	got, err := os.ReadFile(filepath.Join(fx.workdir("worker"), "inbox", "report.bin"))
	if err != nil || !bytes.Equal(got, content) {
		t.Fatalf("worker's copy: %d bytes, %v; want the %d bytes lead shared", len(got), err, len(content))
	}
	for _, want := range []string{"<untrusted-content source=tool:share-file>", "[share-file] The handle is for members of this formation only",
		"[fetch-peer-file] report.bin from lead is now in your workdir at inbox/report.bin: 307200 bytes, and its SHA-256 matches the handle."} {
		if !strings.Contains(transcript, want) {
			t.Errorf("lead's conversation lacks %q:\n%s", want, transcript)
		}
	}
	for _, m := range fx.f.Members {
		for _, secret := range []string{"fm-peer", strings.TrimPrefix(m.URL, "http://")} {
			if strings.Contains(transcript, secret) {
				t.Errorf("a model saw %q", secret)
			}
		}
	}
	if n := count(fx.records(t, "lead"), "peer_file_share"); n != 1 {
		t.Errorf("%d peer_file_share records, want 1", n)
	}
	if n := count(fx.records(t, "worker"), "peer_file_fetch"); n != 1 {
		t.Errorf("%d peer_file_fetch records, want 1", n)
	}
	for member, want := range map[string]string{
		"lead":   `mur_tool_calls_total{member="lead",status="ok",tool="share-file"} 1`,
		"worker": `mur_tool_calls_total{member="worker",status="ok",tool="fetch-peer-file"} 1`,
	} {
		resp, err := http.Get(fx.member(member).URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(b), want) {
			t.Errorf("%s's /metrics lacks %s", member, want)
		}
	}

	// A file swapped after the handle was minted is refused at lead's door, and nothing is stored.
	lead, worker := fx.member("lead"), fx.member("worker")
	sf, err := lead.Session.PeerFiles().ShareFile(context.Background(), "report.bin")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(fx.workdir("lead"), "out", "report.bin"), []byte("swapped"), 0o644)
	_, err = worker.Session.PeerFiles().FetchPeerFile(context.Background(), runtimetools.FetchRequest{Handle: sf.Handle, As: "swapped.bin"})
	var r *runtimetools.Refusal
	if !errors.As(err, &r) || r.Reason != "changed" {
		t.Errorf("fetch of a swapped file: %v", err)
	}
	if _, err := os.Stat(filepath.Join(fx.workdir("worker"), "swapped.bin")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a swapped file was stored: %v", err)
	}
}

// TestSymlinkedOutFindsNoSecret is issue 28's first two holes through a real formation: a command of
// lead's replaces out/ with a symbolic link to the formation's data directory and the model shares a
// secret from it; another makes out/ a link to a tree of someone else's artifact files. Neither is read:
// share-file refuses, naming the link, and the task's artifacts hold one refusal and no file. A handle
// minted while out/ was a directory is refused by the door once out/ is a link to an identical copy.
func TestSymlinkedOutFindsNoSecret(t *testing.T) {
	clock := &testClock{now: time.Now()}
	fx := peerFormation(t, clock, map[string]string{
		"lead/murmur.yaml": strings.Replace(agentOf("lead"), "network:", "shell: {allow: [sh]}, network:", 1) + "exports: {peer_files: out}\n",
		"lead/script.yaml": "rules:\n" +
			"  - match: '^link (?P<to>\\S+) then share (?P<p>\\S+)$'\n    turns:\n" +
			"      - call: [{tool: sh, input: {args: ['-c', 'rm -rf out; ln -s {{.to}} out']}}]\n" +
			"      - call: [{tool: share-file, input: {path: '{{.p}}'}}]\n" +
			"      - say: '{{.transcript}}'\n" +
			"  - match: '^link (?P<to>\\S+)$'\n    turns:\n" +
			"      - call: [{tool: sh, input: {args: ['-c', 'rm -rf out; ln -s {{.to}} out']}}]\n" +
			"      - say: linked\n",
	})
	const secret = "canary-operator-token-4f1c"
	data := filepath.Join(fx.root, "data")
	if err := os.WriteFile(filepath.Join(data, "planted.token"), []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}

	t.Run("share-file through a linked out", func(t *testing.T) {
		task := fx.ask(t, "lead", "link "+data+" then share planted.token")
		transcript := answerOf(task)
		if strings.Contains(transcript, secret) || strings.Contains(transcript, "pf1.") {
			t.Fatalf("a handle was minted, or the secret read, through the link:\n%s", transcript)
		}
		for _, want := range []string{"'share-file' refused: the export root out is a symbolic link", "make out a directory again"} {
			if !strings.Contains(transcript, want) {
				t.Errorf("the refusal lacks %q:\n%s", want, transcript)
			}
		}
		if _, err := fx.member("lead").Session.PeerFiles().ShareFile(context.Background(), "members/lead/tasks.db"); err == nil {
			t.Error("another file of the data directory was shared through the link")
		}
	})

	t.Run("artifacts through a linked out", func(t *testing.T) {
		elsewhere := filepath.Join(fx.root, "elsewhere")
		os.MkdirAll(filepath.Join(elsewhere, "artifacts"), 0o755)
		os.WriteFile(filepath.Join(elsewhere, "artifacts", "theirs.txt"), []byte(secret), 0o644)
		task := fx.ask(t, "lead", "link "+elsewhere)
		if task.Status.State != a2a.TaskStateCompleted {
			t.Fatalf("task %s", task.Status.State)
		}
		var refused []string
		for _, a := range task.Artifacts {
			if a.Name == "response" {
				continue
			}
			for _, p := range a.Parts {
				if strings.Contains(string(p.Raw), secret) || p.URL != "" {
					t.Errorf("artifact %q carries a file from behind the link", a.Name)
				}
			}
			refused = append(refused, a.Name+": "+a.Text())
		}
		if len(refused) != 1 || !strings.Contains(refused[0], "out/artifacts: refused: out/artifacts is a symbolic link, or lies below one (out)") {
			t.Errorf("artifacts %q, want the one refusal of the link", refused)
		}
	})

	t.Run("the door after out became a link", func(t *testing.T) {
		lead, worker := fx.member("lead"), fx.member("worker")
		work := fx.workdir("lead")
		os.Remove(filepath.Join(work, "out"))
		os.MkdirAll(filepath.Join(work, "out"), 0o755)
		os.WriteFile(filepath.Join(work, "out", "r.txt"), []byte("report"), 0o644)
		sf, err := lead.Session.PeerFiles().ShareFile(context.Background(), "r.txt")
		if err != nil {
			t.Fatal(err)
		}
		// The same bytes and times behind a link: only the link tells them apart.
		copyDir := filepath.Join(fx.root, "copy")
		os.Rename(filepath.Join(work, "out"), copyDir)
		os.Symlink(copyDir, filepath.Join(work, "out"))
		key := peercred.NewKey("fm-peer", "f")
		resp, b := get(t, lead.URL, sf.Handle, key.Credential("worker", peercred.Untrusted))
		if resp.StatusCode != http.StatusConflict || strings.Contains(string(b), "report") {
			t.Fatalf("the door through a linked out: %d %s", resp.StatusCode, b)
		}
		_, err = worker.Session.PeerFiles().FetchPeerFile(context.Background(), runtimetools.FetchRequest{Handle: sf.Handle, As: "r.txt"})
		var r *runtimetools.Refusal
		if !errors.As(err, &r) || !strings.Contains(r.Text, "changed on lead's side") {
			t.Fatalf("fetch through a linked out: %v", err)
		}
	})
}
