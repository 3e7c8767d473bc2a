package server

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	a2ago "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/murmur-run/murmur/internal/peercred"
	"github.com/murmur-run/murmur/peerfile"
)

// replicaDir is replica name's directory under the data directory of a replica set's member.
func (rs *replicaSet) replicaDir(name string) string {
	return filepath.Join(filepath.Dir(rs.capsule), "data", "members", "solo", "replicas", name)
}

// TestReplicaPeerFileAtAnotherReplica (DESIGN §16, peer files at any replica): a file a task run at
// replica r1 shares is redeemed by a peer member at r2's door, where no such file is on disk: the same
// bytes, with the handle's Repr-Digest and length. The handle names the bytes shared: once the file
// changes at r1, both doors still send what was shared.
func TestReplicaPeerFileAtAnotherReplica(t *testing.T) {
	rs := startReplicaRoster(t, 2, 2*time.Second, map[string]string{
		"murmur.yaml": agentOf("solo") + "exports: {peer_files: out}\n",
		"script.yaml": "rules:\n  - match: '^share (?P<p>\\S+)$'\n    turns:\n" +
			"      - call: [{tool: share-file, input: {path: '{{.p}}'}}]\n" +
			"      - say: '{{(index .results 0).data.handle}}'\n",
		"../worker/murmur.yaml": "name: worker\nscript: {command: [cat]}\n",
	}, "  - {name: worker, capsule: ./worker, listen: '127.0.0.1:0'}\n")
	content := make([]byte, 300<<10)
	rand.Read(content)
	shared := filepath.Join(rs.replicaDir("r1"), "work", "out", "report.bin")
	if err := os.WriteFile(shared, content, 0o644); err != nil {
		t.Fatal(err)
	}
	task := sendTask(t, rs.clients[0], "share report.bin", false)
	handle := responseText(task)
	if task.Status.State != a2ago.TaskStateCompleted || !strings.HasPrefix(handle, peerfile.Prefix) {
		t.Fatalf("the sharing task: %s, answer %q %q", task.Status.State, handle, statusText(task))
	}
	if owner := rs.owners()[task.ID]; owner != "r1" {
		t.Fatalf("the sharing task ran at %q, want r1 (it was sent there, idle)", owner)
	}
	if _, err := os.Stat(filepath.Join(rs.replicaDir("r2"), "work", "out", "report.bin")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("r2 has the file on disk (%v): the test would prove nothing", err)
	}
	worker := peercred.NewKey(testFormationToken, "reps").Credential("worker", peercred.Untrusted)
	check := func(t *testing.T, replica int) {
		t.Helper()
		resp, b := get(t, rs.fs[replica].Members[0].URL, handle, worker)
		if resp.StatusCode != http.StatusOK || !bytes.Equal(b, content) {
			t.Fatalf("r%d's door: status %d, %d bytes (%s); want 200 and the %d bytes shared", replica+1, resp.StatusCode, len(b), clipBody(b), len(content))
		}
		if got, want := resp.Header.Get(peerfile.DigestHeader), peerfile.FormatDigest(sha256.Sum256(content)); got != want {
			t.Errorf("r%d's Repr-Digest %q, want %q", replica+1, got, want)
		}
		if got := resp.Header.Get("Content-Length"); got != strconv.Itoa(len(content)) {
			t.Errorf("r%d's Content-Length %s", replica+1, got)
		}
	}
	check(t, 1)
	check(t, 0)
	os.WriteFile(shared, []byte("rewritten after it was shared"), 0o644)
	check(t, 1)
	check(t, 0)
	// The checks before the file still hold at r2: a forged handle is refused there.
	h, _ := peerfile.Decode(handle)
	h.Size++
	if resp, b := get(t, rs.fs[1].Members[0].URL, h.String(), worker); resp.StatusCode != http.StatusForbidden || reasonOf(b) != "forged" {
		t.Errorf("an altered handle at r2: %d %s", resp.StatusCode, b)
	}
}

// TestReplicaArtifactFileAtAnotherReplica (DESIGN §16, artifacts at any replica): the file over 256 KiB
// a task run at replica r1 wrote is downloaded by the task's sender at r2's door, whole and by range;
// r1 keeps no copy of it on disk (the database holds it); anyone else is told there is no such task.
func TestReplicaArtifactFileAtAnotherReplica(t *testing.T) {
	payload := make([]byte, 300000)
	rand.Read(payload)
	rs := startReplicaFiles(t, 2, 2*time.Second, map[string]string{
		"murmur.yaml": "name: solo\nscript: {command: [sh, -c, 'read -r l; mkdir -p out/artifacts; cp \"$MUR_CAPSULE_DIR/payload.bin\" out/artifacts/big.bin; echo made']}\n",
		"payload.bin": string(payload),
	})
	task := sendTask(t, rs.clients[0], "make", false)
	if task.Status.State != a2ago.TaskStateCompleted {
		t.Fatalf("the task: %s %q", task.Status.State, statusText(task))
	}
	if owner := rs.owners()[task.ID]; owner != "r1" {
		t.Fatalf("the task ran at %q, want r1 (it was sent there, idle)", owner)
	}
	var link string
	for _, a := range task.Artifacts {
		if a.Name == "big.bin" && len(a.Parts) == 1 {
			link = string(a.Parts[0].URL())
		}
	}
	u, err := url.Parse(link)
	if link == "" || err != nil {
		t.Fatalf("no URL for big.bin among %+v", task.Artifacts)
	}
	if _, err := os.Stat(filepath.Join(rs.replicaDir("r1"), "artifacts", string(task.ID))); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("r1 kept the file on disk too (%v); the database holds it", err)
	}
	fetch := func(t *testing.T, replica int, token, rng string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, rs.fs[replica].Members[0].URL+u.EscapedPath(), nil)
		req.Header.Set("Authorization", "Bearer "+token)
		if rng != "" {
			req.Header.Set("Range", rng)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	for _, replica := range []int{1, 0} {
		resp, b := fetch(t, replica, testOperatorToken, "")
		if resp.StatusCode != http.StatusOK || !bytes.Equal(b, payload) {
			t.Fatalf("r%d's door: status %d, %d bytes (%s); want 200 and the %d bytes written", replica+1, resp.StatusCode, len(b), clipBody(b), len(payload))
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/octet-stream" {
			t.Errorf("r%d's Content-Type %q", replica+1, ct)
		}
	}
	resp, b := fetch(t, 1, testOperatorToken, "bytes=262000-262143")
	if resp.StatusCode != http.StatusPartialContent || !bytes.Equal(b, payload[262000:262144]) {
		t.Errorf("a range at r2: status %d, %d bytes", resp.StatusCode, len(b))
	}
	other := peercred.NewKey(testFormationToken, "reps").Credential("solo", peercred.Untrusted)
	if resp, b := fetch(t, 1, other, ""); resp.StatusCode != http.StatusNotFound {
		t.Errorf("a peer that did not send the task, at r2: %d %s; want 404", resp.StatusCode, clipBody(b))
	}
}

// clipBody is the start of a response body, for a failure's message.
func clipBody(b []byte) string {
	if len(b) > 200 {
		b = b[:200]
	}
	return string(b)
}
