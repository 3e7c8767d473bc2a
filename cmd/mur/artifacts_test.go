package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/murmur-run/murmur/member/artifact"
)

// artifactProject is a capsule with a project store beside it holding local/echo 1.0.0 and 1.1.0 and
// local/policy 1.0.0 (a hook).
func artifactProject(t *testing.T, capsuleYAML string) (root, capsule string) {
	t.Helper()
	root = t.TempDir()
	write := func(rel, body string) {
		p := filepath.Join(root, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, v := range []string{"1.0.0", "1.1.0"} {
		d := "cap/.murmur/store/local/echo/" + v + "/"
		write(d+"murmur.yaml", fmt.Sprintf("name: local/echo\nversion: %s\nruntime: tool\nimplementation: wasm\nmodule: tool.wasm\n", v))
		write(d+"tool.wasm", "\x00asm\x01\x00\x00\x00"+v)
	}
	write("cap/.murmur/store/local/policy/1.0.0/murmur.yaml", "name: local/policy\nversion: 1.0.0\nruntime: hook\nimplementation: command\ncommand: [./p.sh]\nevents: [on-tool-call]\n")
	write("cap/.murmur/store/local/policy/1.0.0/p.sh", "#!/bin/sh\n")
	write("cap/murmur.yaml", capsuleYAML)
	return root, filepath.Join(root, "cap")
}

const plainCapsule = "name: cap\ninference:\n  driver: local\n  choices:\n    local: {driver: script}\n"

func mur(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	err := run(context.Background(), args, envOf(map[string]string{"HOME": t.TempDir()}), &out, &errb)
	code := exitCodeFor(err, &errb)
	return code, out.String(), errb.String()
}

func TestPullAndList(t *testing.T) {
	_, capsule := artifactProject(t, plainCapsule)
	lock := filepath.Join(capsule, "murmur.lock")
	code, out, _ := mur(t, "list", "--capsule", capsule)
	if code != 0 || out != "no artifacts are pinned in "+lock+"\n" {
		t.Errorf("empty list: %d %q", code, out)
	}
	code, out, errs := mur(t, "pull", "--capsule", capsule, "local/echo")
	digest, _ := artifact.Digest(filepath.Join(capsule, ".murmur/store/local/echo/1.1.0"))
	want := "pinned local/echo@1.1.0 (" + digest + ") from the project store in " + lock + "\n" +
		"local/echo is not declared in " + filepath.Join(capsule, "murmur.yaml") + " yet: add it under tools:, skills: or hooks: (by its role) to give it to the session\n"
	if code != 0 || out != want {
		t.Fatalf("pull: exit %d\n%s\nwant\n%s%s", code, out, want, errs)
	}
	l, err := artifact.ReadLock(lock)
	if err != nil || len(l.Pins) != 1 || l.Pins[0].Origin != artifact.OriginOperator || l.Pins[0].Digest != digest {
		t.Fatalf("lock %+v %v", l, err)
	}
	// A hook is pinned too (the operator's to pin).
	if code, _, errs := mur(t, "pull", "--capsule", capsule, "local/policy@1.0.0"); code != 0 {
		t.Fatalf("pull hook: %d %s", code, errs)
	}
	code, out, _ = mur(t, "list", "--capsule", capsule)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 3 || !strings.HasPrefix(lines[0], "ARTIFACT") ||
		!strings.Contains(lines[1], "local/echo") || !strings.Contains(lines[1], "1.1.0") || !strings.Contains(lines[1], "operator") ||
		!strings.Contains(lines[1], "project store") || !strings.HasSuffix(lines[1], digest) || !strings.Contains(lines[2], "local/policy") {
		t.Errorf("list:\n%s", out)
	}
	for _, name := range []string{"session-status", "pull-artifact", "share-file"} {
		if strings.Contains(out, name) {
			t.Errorf("mur list shows the runtime-provided %s", name)
		}
	}

	// Another version: the conflict, and the lock unchanged.
	before, _ := os.ReadFile(lock)
	code, _, errs = mur(t, "pull", "--capsule", capsule, "local/echo@1.0.0")
	if code != 2 || !strings.Contains(errs, "murmur.lock conflict for 'local/echo': murmur.lock pins version 1.1.0, not 1.0.0") {
		t.Errorf("conflict: %d %s", code, errs)
	}
	for _, tc := range []struct{ args, want string }{
		{"local/pull-artifact", `E-CAP-013: local/pull-artifact: its tool name "pull-artifact" is reserved`},
		{"local/nothing", "local/nothing is in none of the places this capsule may pull from (the project store, the global store)"},
		{"echo", `"echo" is not a full artifact name: it has no scope; write scope/name, such as local/echo`},
	} {
		code, _, errs := mur(t, "pull", "--capsule", capsule, tc.args)
		if code != 2 || !strings.Contains(errs, tc.want) {
			t.Errorf("pull %s: %d %s", tc.args, code, errs)
		}
	}
	if after, _ := os.ReadFile(lock); !bytes.Equal(before, after) {
		t.Errorf("a refused pull changed murmur.lock")
	}
	// A lock edited by hand into invalid YAML is an error with its line, for list and pull alike, and is
	// not written over.
	os.WriteFile(lock, []byte("pins:\n  - name: [\n"), 0o644)
	for _, args := range [][]string{{"list", "--capsule", capsule}, {"pull", "--capsule", capsule, "local/echo"}} {
		code, _, errs := mur(t, args...)
		if code != 2 || !strings.Contains(errs, lock+":") {
			t.Errorf("%v on a broken lock: %d %s", args, code, errs)
		}
	}
	if after, _ := os.ReadFile(lock); string(after) != "pins:\n  - name: [\n" {
		t.Errorf("the broken lock was written over")
	}
}

func TestCheckArtifacts(t *testing.T) {
	_, capsule := artifactProject(t, plainCapsule+"tools: [local/echo@1.0.0]\nhooks: [local/policy]\n")
	mf := filepath.Join(capsule, "murmur.yaml")
	code, out, _ := mur(t, "check", "--capsule", capsule)
	if code != 0 || !strings.Contains(out, "0 error(s)") {
		t.Fatalf("check: %d\n%s", code, out)
	}
	// mur check writes nothing.
	if _, err := os.Stat(filepath.Join(capsule, "murmur.lock")); err == nil {
		t.Errorf("mur check wrote murmur.lock")
	}
	if code, _, errs := mur(t, "pull", "--capsule", capsule, "local/echo@1.0.0"); code != 0 {
		t.Fatal(errs)
	}
	pinned, _ := artifact.Digest(filepath.Join(capsule, ".murmur/store/local/echo/1.0.0"))
	os.WriteFile(filepath.Join(capsule, ".murmur/store/local/echo/1.0.0/tool.wasm"), []byte("\x00asm\x01\x00\x00\x00changed"), 0o644)
	now, _ := artifact.Digest(filepath.Join(capsule, ".murmur/store/local/echo/1.0.0"))
	code, out, _ = mur(t, "check", "--capsule", capsule)
	want := "E-ART-002: " + mf + ": tools[0]: murmur.lock conflict for 'local/echo': murmur.lock pins version 1.0.0 with digest " + pinned +
		", but the copy in the project store has digest " + now + ", so its files changed after it was pinned"
	if code != 2 || !strings.Contains(out, want) {
		t.Errorf("check after a change: %d\n%s\nwant %s", code, out, want)
	}
	// A reserved name is reported before anything is read: the broken store entry is not mentioned.
	_, capsule = artifactProject(t, plainCapsule+"tools: [local/echo, murmur/delegate-task]\n")
	os.WriteFile(filepath.Join(capsule, ".murmur/store/local/echo/1.1.0/murmur.yaml"), []byte("nope: 1\n"), 0o644)
	code, out, _ = mur(t, "check", "--capsule", capsule)
	if code != 2 || !strings.Contains(out, `E-CAP-013: `+filepath.Join(capsule, "murmur.yaml")+`: tools[1]: murmur/delegate-task: its tool name "delegate-task" is reserved`) ||
		strings.Contains(out, "E-ART-001") {
		t.Errorf("reserved: %d\n%s", code, out)
	}
	// With the reserved name gone, the corrupt store entry is an error naming the file and line.
	_, capsule = artifactProject(t, "name: cap\ntransport: process\nharness: {command: [/bin/true], dialect: murmur-jsonl}\ntools: [local/echo]\ncapabilities:\n  install: {tool: [local/*]}\n")
	os.WriteFile(filepath.Join(capsule, ".murmur/store/local/echo/1.1.0/murmur.yaml"), []byte("nope: 1\n"), 0o644)
	code, out, _ = mur(t, "check", "--capsule", capsule)
	for _, want := range []string{
		"E-ART-001: " + filepath.Join(capsule, "murmur.yaml") + ": tools[0]: the copy of local/echo@1.1.0 in the project store cannot be used:",
		filepath.Join(capsule, ".murmur/store/local/echo/1.1.0/murmur.yaml") + ":1:",
		"E-CAP-014: " + filepath.Join(capsule, "murmur.yaml") + ": capabilities.install is declared under transport: process",
	} {
		if code != 2 || !strings.Contains(out, want) {
			t.Errorf("check: %d lacks %q:\n%s", code, want, out)
		}
	}
}

// githubRelease serves, on loopback, what mur pull reads from a GitHub source acme/artifacts (GitHub
// Enterprise Server's layout, as MUR_GITHUB_BASE makes the fetcher use): the repository's owner id, its
// releases, and each release's artifact.tar.gz with its .sha256.
func githubRelease(t *testing.T, owner int64, archives map[string][]byte) *httptest.Server {
	t.Helper()
	files := map[string][]byte{}
	var releases []map[string]any
	for tag, archive := range archives {
		sum := sha256.Sum256(archive)
		p := "/acme/artifacts/releases/download/" + tag + "/artifact.tar.gz"
		files[p], files[p+".sha256"] = archive, []byte(hex.EncodeToString(sum[:])+"  artifact.tar.gz\n")
		releases = append(releases, map[string]any{"tag_name": tag})
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/v3/repos/acme/artifacts":
			fmt.Fprintf(w, `{"owner": {"login": "acme", "id": %d}}`, owner)
		case "/api/v3/repos/acme/artifacts/releases":
			json.NewEncoder(w).Encode(releases)
		default:
			if b, ok := files[r.URL.Path]; ok {
				w.Write(b)
				return
			}
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// releaseArchive is a release's artifact.tar.gz holding files (path -> body), under ./ as git archive
// and tar -C DIR . write it.
func releaseArchive(t *testing.T, files map[string]string, extra ...*tar.Header) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	tw := tar.NewWriter(zw)
	tw.WriteHeader(&tar.Header{Name: "./", Typeflag: tar.TypeDir, Mode: 0o755})
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		tw.WriteHeader(&tar.Header{Name: "./" + n, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(files[n]))})
		tw.Write([]byte(files[n]))
	}
	for _, h := range extra {
		tw.WriteHeader(h)
	}
	tw.Close()
	zw.Close()
	return b.Bytes()
}

// mur pull fetches a version no store holds from the scope's GitHub source, checks it as a stored one,
// keeps it in the project store and pins it with the source and its owner id; staging (mur check) then
// finds it without the network. A source answering for another owner is E-REG-010, an archive with ..
// or a link is refused, and neither writes anything.
func TestPullFromGitHubSource(t *testing.T) {
	_, capsule := artifactProject(t, plainCapsule)
	tool := func(v string) map[string]string {
		return map[string]string{
			"murmur.yaml": fmt.Sprintf("name: acme/count\nversion: %s\nruntime: tool\nimplementation: wasm\nmodule: tool.wasm\n", v),
			"tool.wasm":   "\x00asm\x01\x00\x00\x00count" + v,
		}
	}
	srv := githubRelease(t, 4242, map[string][]byte{
		"count-v1.0.0": releaseArchive(t, tool("1.0.0")),
		"count-v1.2.0": releaseArchive(t, tool("1.2.0")),
		"count-v2.0.0": releaseArchive(t, tool("2.0.0"), &tar.Header{Name: "../escape", Typeflag: tar.TypeReg, Mode: 0o644}),
		"count-v3.0.0": releaseArchive(t, tool("3.0.0"), &tar.Header{Name: "./link", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"}),
	})
	os.WriteFile(filepath.Join(capsule, ".murmur", "sources.yaml"), []byte("acme: github:acme/artifacts\n"), 0o644)
	home := t.TempDir()
	pull := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		env := envOf(map[string]string{"HOME": home, "MUR_GITHUB_BASE": srv.URL})
		err := run(context.Background(), append([]string{"pull", "--capsule", capsule}, args...), env, &out, &errb)
		return exitCodeFor(err, &errb), out.String(), errb.String()
	}
	lock := filepath.Join(capsule, "murmur.lock")
	kept := filepath.Join(capsule, ".murmur/store/acme/count/1.2.0")

	// The two bad releases first: refused, nothing written anywhere.
	for _, tc := range []struct{ version, want string }{
		{"2.0.0", `acme/count@2.0.0 from github:acme/artifacts: the archive was refused: entry "../escape" is not a plain path inside the artifact`},
		{"3.0.0", `acme/count@3.0.0 from github:acme/artifacts: the archive was refused: entry "./link" is a symbolic link`},
	} {
		code, _, errs := pull("acme/count@" + tc.version)
		if code != 2 || !strings.Contains(errs, tc.want) {
			t.Errorf("pull %s: %d %s\nwant %s", tc.version, code, errs, tc.want)
		}
	}
	if _, err := os.Stat(lock); err == nil {
		t.Errorf("a refused pull wrote murmur.lock")
	}
	if _, err := os.Stat(filepath.Join(capsule, ".murmur/store/acme")); err == nil {
		t.Errorf("a refused pull wrote into the project store")
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(capsule), "escape")); err == nil {
		t.Errorf("the archive's ../escape was written")
	}

	code, out, errs := pull("acme/count@1.2.0")
	if code != 0 {
		t.Fatalf("pull: %d %s", code, errs)
	}
	digest, err := artifact.Digest(kept)
	if err != nil {
		t.Fatalf("the fetched release is not kept in the project store: %v", err)
	}
	want := "pinned acme/count@1.2.0 (" + digest + ") from github:acme/artifacts (owner id 4242), kept in " + kept + ", in " + lock + "\n"
	if !strings.HasPrefix(out, want) {
		t.Errorf("pull said\n%s\nwant\n%s", out, want)
	}
	l, err := artifact.ReadLock(lock)
	if err != nil || len(l.Pins) != 1 {
		t.Fatalf("lock %+v %v", l, err)
	}
	if p := l.Pins[0]; p.Source != "github:acme/artifacts" || p.Owner != 4242 || p.Origin != artifact.OriginOperator || p.Digest != digest || l.Owners["acme"] != 4242 {
		t.Errorf("pin %+v owners %v", p, l.Owners)
	}

	// Declared, it stages from the project store with no source reachable.
	os.WriteFile(filepath.Join(capsule, "murmur.yaml"), []byte(plainCapsule+"tools: [acme/count@1.2.0]\n"), 0o644)
	srv.Close()
	if code, out, _ := mur(t, "check", "--capsule", capsule); code != 0 || !strings.Contains(out, "0 error(s)") {
		t.Errorf("check of the pulled tool: %d\n%s", code, out)
	}

	// The scope's source now answers for another owner: E-REG-010, the lock unchanged.
	other := githubRelease(t, 9999, map[string][]byte{"count-v1.0.0": releaseArchive(t, tool("1.0.0"))})
	before, _ := os.ReadFile(lock)
	var o, e bytes.Buffer
	err = run(context.Background(), []string{"pull", "--capsule", capsule, "acme/other@1.0.0"},
		envOf(map[string]string{"HOME": home, "MUR_GITHUB_BASE": other.URL}), &o, &e)
	if exitCodeFor(err, &e) != 2 || !strings.Contains(e.String(), "E-REG-010") {
		t.Errorf("another owner: %v %s", err, e.String())
	}
	if after, _ := os.ReadFile(lock); !bytes.Equal(before, after) {
		t.Errorf("a refused pull changed murmur.lock")
	}
}
