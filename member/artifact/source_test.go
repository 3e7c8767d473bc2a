package artifact

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// entry is one member of a test archive.
type entry struct {
	name     string
	body     string
	typeflag byte // tar.TypeReg when 0
	link     string
}

func tarGz(t *testing.T, entries []entry) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.body)), Typeflag: e.typeflag, Linkname: e.link}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Typeflag != tar.TypeReg {
			h.Size = 0
		}
		if h.Typeflag == tar.TypeDir {
			h.Mode = 0o755
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			tw.Write([]byte(e.body))
		}
	}
	tw.Close()
	zw.Close()
	return b.Bytes()
}

func toolEntries(name, version string, wit int) []entry {
	return []entry{
		{name: "./", typeflag: tar.TypeDir},
		{name: "./murmur.yaml", body: toolManifest(name, version, wit)},
		{name: "./tool.wasm", body: wasmHead + name + version},
	}
}

func sha256Hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// releaseServer serves GitHub's release downloads and the two API answers Fetcher reads, for one
// repository acme/artifacts, on loopback.
type releaseServer struct {
	*httptest.Server
	mu       sync.Mutex
	owner    int64
	files    map[string][]byte // path -> body
	releases []string          // tag names
	hits     map[string]int
}

func newReleaseServer(t *testing.T) *releaseServer {
	s := &releaseServer{owner: 4242, files: map[string][]byte{}, hits: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.hits[r.URL.Path]++
		switch r.URL.Path {
		case "/api/v3/repos/acme/artifacts":
			if s.owner < 0 {
				http.Error(w, "down", http.StatusInternalServerError)
				return
			}
			fmt.Fprintf(w, `{"id": 1, "name": "artifacts", "owner": {"login": "acme", "id": %d}}`, s.owner)
		case "/api/v3/repos/acme/artifacts/releases":
			var list []map[string]any
			for _, tag := range s.releases {
				list = append(list, map[string]any{"tag_name": tag, "draft": strings.HasSuffix(tag, "-draft")})
			}
			json.NewEncoder(w).Encode(list)
		default:
			body, ok := s.files[r.URL.Path]
			if !ok {
				http.NotFound(w, r)
				return
			}
			w.Write(body)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

// publish serves archive as the release of name@version, with the sha256 file sum (the archive's own
// when "").
func (s *releaseServer) publish(name, version string, archive []byte, sum string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sum == "" {
		sum = sha256Hex(archive) + "  artifact.tar.gz\n"
	}
	tag := Name(name).Tool() + "-v" + version
	p := "/acme/artifacts/releases/download/" + tag + "/artifact.tar.gz"
	s.files[p], s.files[p+".sha256"] = archive, []byte(sum)
	s.releases = append(s.releases, tag)
}

func (s *releaseServer) fetcher(t *testing.T) *Fetcher {
	return &Fetcher{Base: s.URL, Client: s.Client(), TempDir: t.TempDir()}
}

var acme = Source{"acme", "artifacts"}

func TestFetchGood(t *testing.T) {
	srv := newReleaseServer(t)
	srv.publish("acme/fmt", "1.0.0", tarGz(t, toolEntries("acme/fmt", "1.0.0", 1)), "")
	f := srv.fetcher(t)
	got, err := f.Fetch(context.Background(), acme, Ref{"acme/fmt", "1.0.0"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	local := t.TempDir()
	writeFiles(t, local, map[string]string{"murmur.yaml": toolManifest("acme/fmt", "1.0.0", 1), "tool.wasm": wasmHead + "acme/fmt1.0.0"})
	want, _ := Digest(local)
	if got.Digest != want || got.Place != "github:acme/artifacts" || got.Owner != 4242 || got.Manifest.Name != "acme/fmt" {
		t.Errorf("fetched %+v, want digest %s", got.Artifact, want)
	}
	if p := got.Pin(OriginAgent); p.Source != "github:acme/artifacts" || p.Owner != 4242 {
		t.Errorf("pin %+v", p)
	}
	// The same owner as recorded is fine.
	again, err := f.Fetch(context.Background(), acme, Ref{"acme/fmt", "1.0.0"}, 4242)
	if err != nil {
		t.Fatal(err)
	}
	again.Close()
	if err := got.Close(); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(f.TempDir); len(left) > 0 {
		t.Errorf("Close left %v", left)
	}
}

// TestFetchRefusals checks each refusal byte for byte, and that a refused fetch leaves nothing behind.
func TestFetchRefusals(t *testing.T) {
	good := toolEntries("acme/fmt", "1.0.0", 1)
	with := func(extra ...entry) []entry { return append(append([]entry{}, good...), extra...) }
	for _, tc := range []struct {
		name     string
		setup    func(s *releaseServer) // publishes what the case needs
		recorded int64
		max      int64
		want     func(s *releaseServer) string
		is       error
	}{
		{name: "wrong sha256", setup: func(s *releaseServer) {
			s.publish("acme/fmt", "1.0.0", tarGz(t, good), strings.Repeat("ab", 32)+"\n")
		}, want: func(s *releaseServer) string {
			return "not-fetched: acme/fmt@1.0.0 from github:acme/artifacts: the archive's sha256 is " +
				sha256Hex(s.files["/acme/artifacts/releases/download/fmt-v1.0.0/artifact.tar.gz"]) +
				", but the release's artifact.tar.gz.sha256 says " + strings.Repeat("ab", 32)
		}, is: ErrNotFetched},
		{name: "sha256 file without a sum", setup: func(s *releaseServer) { s.publish("acme/fmt", "1.0.0", tarGz(t, good), "pending\n") },
			want: func(s *releaseServer) string {
				return "not-fetched: acme/fmt@1.0.0 from github:acme/artifacts: " + s.URL + "/acme/artifacts/releases/download/fmt-v1.0.0/artifact.tar.gz.sha256 holds no sha256 (64 hex digits)"
			}, is: ErrNotFetched},
		{name: "dot-dot entry", setup: func(s *releaseServer) {
			s.publish("acme/fmt", "1.0.0", tarGz(t, with(entry{name: "../evil", body: "x"})), "")
		},
			want: func(*releaseServer) string {
				return `not-fetched: acme/fmt@1.0.0 from github:acme/artifacts: the archive was refused: entry "../evil" is not a plain path inside the artifact (.., an absolute path, or an unclean one)`
			}, is: ErrNotFetched},
		{name: "dot-dot inside", setup: func(s *releaseServer) {
			s.publish("acme/fmt", "1.0.0", tarGz(t, with(entry{name: "a/../../evil", body: "x"})), "")
		}, want: func(*releaseServer) string {
			return `not-fetched: acme/fmt@1.0.0 from github:acme/artifacts: the archive was refused: entry "a/../../evil" is not a plain path inside the artifact (.., an absolute path, or an unclean one)`
		}, is: ErrNotFetched},
		{name: "absolute entry", setup: func(s *releaseServer) {
			s.publish("acme/fmt", "1.0.0", tarGz(t, with(entry{name: "/tmp/evil", body: "x"})), "")
		},
			want: func(*releaseServer) string {
				return `not-fetched: acme/fmt@1.0.0 from github:acme/artifacts: the archive was refused: entry "/tmp/evil" is not a plain path inside the artifact (.., an absolute path, or an unclean one)`
			}, is: ErrNotFetched},
		{name: "symlink entry", setup: func(s *releaseServer) {
			s.publish("acme/fmt", "1.0.0", tarGz(t, with(entry{name: "./link", typeflag: tar.TypeSymlink, link: "/etc/passwd"})), "")
		}, want: func(*releaseServer) string {
			return `not-fetched: acme/fmt@1.0.0 from github:acme/artifacts: the archive was refused: entry "./link" is a symbolic link; an artifact holds regular files and directories only`
		}, is: ErrNotFetched},
		{name: "hard link entry", setup: func(s *releaseServer) {
			s.publish("acme/fmt", "1.0.0", tarGz(t, with(entry{name: "./hard", typeflag: tar.TypeLink, link: "tool.wasm"})), "")
		}, want: func(*releaseServer) string {
			return `not-fetched: acme/fmt@1.0.0 from github:acme/artifacts: the archive was refused: entry "./hard" is a hard link; an artifact holds regular files and directories only`
		}, is: ErrNotFetched},
		{name: "device entry", setup: func(s *releaseServer) {
			s.publish("acme/fmt", "1.0.0", tarGz(t, with(entry{name: "./null", typeflag: tar.TypeChar})), "")
		}, want: func(*releaseServer) string {
			return `not-fetched: acme/fmt@1.0.0 from github:acme/artifacts: the archive was refused: entry "./null" is a device or a pipe; an artifact holds regular files and directories only`
		}, is: ErrNotFetched},
		{name: "repeated entry", setup: func(s *releaseServer) {
			s.publish("acme/fmt", "1.0.0", tarGz(t, with(entry{name: "tool.wasm", body: "x"})), "")
		}, want: func(*releaseServer) string {
			return `not-fetched: acme/fmt@1.0.0 from github:acme/artifacts: the archive was refused: entry "tool.wasm" appears twice`
		}, is: ErrNotFetched},
		{name: "archive too large", max: 64, setup: func(s *releaseServer) { s.publish("acme/fmt", "1.0.0", tarGz(t, good), "") },
			want: func(s *releaseServer) string {
				return "not-fetched: acme/fmt@1.0.0 from github:acme/artifacts: the release could not be read: GET " + s.URL + "/acme/artifacts/releases/download/fmt-v1.0.0/artifact.tar.gz: more than 64 bytes"
			}, is: ErrNotFetched},
		{name: "not gzip", setup: func(s *releaseServer) { s.publish("acme/fmt", "1.0.0", []byte("not an archive"), "") },
			want: func(*releaseServer) string {
				return "not-fetched: acme/fmt@1.0.0 from github:acme/artifacts: the archive was refused: not a gzip file: gzip: invalid header"
			}, is: ErrNotFetched},
		{name: "wrong owner", recorded: 77, setup: func(s *releaseServer) { s.publish("acme/fmt", "1.0.0", tarGz(t, good), "") },
			want: func(*releaseServer) string {
				return "not-fetched: E-REG-010: github:acme/artifacts answers for GitHub owner id 4242, but murmur.lock records owner id 77 for scope acme; the repository may have changed hands: check it, then point the scope at the right repository in .murmur/sources.yaml, or (trusting the new owner) change the scope's owner in murmur.lock"
			}, is: ErrOwner},
		{name: "source down", setup: func(s *releaseServer) { s.owner = -1 },
			want: func(s *releaseServer) string {
				return "not-fetched: acme/fmt@1.0.0 from github:acme/artifacts: the source could not be read: GET " + s.URL + "/api/v3/repos/acme/artifacts: 500 Internal Server Error"
			}, is: ErrNotFetched},
		{name: "no such release", setup: func(s *releaseServer) {},
			want: func(s *releaseServer) string {
				return "not-found: github:acme/artifacts has no release fmt-v1.0.0 (GET " + s.URL + "/acme/artifacts/releases/download/fmt-v1.0.0/artifact.tar.gz.sha256: 404 Not Found)"
			}, is: ErrNotFound},
		{name: "another artifact in the archive", setup: func(s *releaseServer) {
			s.publish("acme/fmt", "1.0.0", tarGz(t, toolEntries("acme/lint", "1.0.0", 1)), "")
		}, want: func(s *releaseServer) string {
			return "not-fetched: acme/fmt@1.0.0 from github:acme/artifacts failed a check:\n" + filepath.Join("DIR", "murmur.yaml") +
				":1: name acme/lint does not match the release it was fetched as, acme/fmt@1.0.0; write name: acme/fmt, or put the artifact where acme/lint belongs"
		}, is: ErrNotFetched},
		{name: "tool without its module", setup: func(s *releaseServer) { s.publish("acme/fmt", "1.0.0", tarGz(t, good[:2]), "") },
			want: func(s *releaseServer) string {
				return "not-granted: acme/fmt@1.0.0 from github:acme/artifacts is not what its murmur.yaml says it is:\n" + filepath.Join("DIR", "murmur.yaml") +
					":5: module tool.wasm is not in the artifact directory; put the file there, or name the file that is (module: tool.wasm)"
			}, is: ErrNotGranted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newReleaseServer(t)
			tc.setup(srv)
			f := srv.fetcher(t)
			f.MaxArchiveBytes = tc.max
			got, err := f.Fetch(context.Background(), acme, Ref{"acme/fmt", "1.0.0"}, tc.recorded)
			if err == nil {
				got.Close()
				t.Fatal("no error")
			}
			want := tc.want(srv)
			// The unpacked directory's name is random: put it in place of DIR.
			var r *Refusal
			if errors.As(err, &r) {
				if i := strings.Index(err.Error(), "/mur-fetch-"); i >= 0 {
					j := strings.Index(err.Error()[i:], "/artifact/")
					want = strings.Replace(want, "DIR", err.Error()[strings.LastIndex(err.Error()[:i], "\n")+1:i+j+len("/artifact")], 1)
				}
			}
			if diff := cmp.Diff(want, err.Error()); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if !errors.Is(err, tc.is) {
				t.Errorf("errors.Is(err, %v) = false", tc.is)
			}
			if left, _ := os.ReadDir(f.TempDir); len(left) > 0 {
				t.Errorf("a refused fetch left %v", left)
			}
			if _, err := os.Lstat(filepath.Join(filepath.Dir(f.TempDir), "evil")); err == nil {
				t.Error("an entry was written outside the temporary directory")
			}
		})
	}
}

// TestFetchOwnerCheckedFirst: a source answering for another owner is refused before its release is
// downloaded.
func TestFetchOwnerCheckedFirst(t *testing.T) {
	srv := newReleaseServer(t)
	srv.publish("acme/fmt", "1.0.0", tarGz(t, toolEntries("acme/fmt", "1.0.0", 1)), "")
	srv.owner = 999
	_, err := srv.fetcher(t).Fetch(context.Background(), acme, Ref{"acme/fmt", "1.0.0"}, 4242)
	if !errors.Is(err, ErrOwner) || !errors.Is(err, ErrNotFetched) {
		t.Fatalf("err = %v, want E-REG-010", err)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if n := srv.hits["/acme/artifacts/releases/download/fmt-v1.0.0/artifact.tar.gz"] + srv.hits["/acme/artifacts/releases/download/fmt-v1.0.0/artifact.tar.gz.sha256"]; n != 0 {
		t.Errorf("the release was downloaded %d times", n)
	}
}

func TestFinder(t *testing.T) {
	srv := newReleaseServer(t)
	srv.publish("acme/fmt", "1.0.0", tarGz(t, toolEntries("acme/fmt", "1.0.0", 1)), "")
	srv.publish("acme/fmt", "1.1.0", tarGz(t, toolEntries("acme/fmt", "1.1.0", 1)), "")
	srv.publish("acme/fmt", "2.0.0", tarGz(t, toolEntries("acme/fmt", "2.0.0", 3)), "")
	srv.releases = append(srv.releases, "fmt-v3.0.0-draft", "lint-v9.0.0")
	stores := twoStores(t)
	putTool(t, stores[1].Dir, "acme/fmt", "0.9.0", 3) // held, but does not fit
	putTool(t, stores[0].Dir, "local/echo", "1.0.0", 1)
	fin := &Finder{Stores: stores, Sources: Sources{"acme": acme}, Fetcher: srv.fetcher(t)}

	// A store answers when it holds the version.
	got, _, err := fin.Find(context.Background(), Ref{Name: "local/echo"})
	if err != nil || got.Place != ProjectStore {
		t.Fatalf("Find(local/echo) = %v, %v", got, err)
	}
	got.Close()

	// A version no store holds is fetched.
	got, _, err = fin.Find(context.Background(), Ref{"acme/fmt", "1.0.0"})
	if err != nil || got.Place != "github:acme/artifacts" || got.Manifest.Version != "1.0.0" {
		t.Fatalf("Find(acme/fmt@1.0.0) = %v, %v", got, err)
	}
	got.Close()

	// Without a version: the newest release that fits, 2.0.0 tried and passed over.
	got, _, err = fin.Find(context.Background(), Ref{Name: "acme/fmt"})
	if err != nil || got.Manifest.Version != "1.1.0" {
		t.Fatalf("Find(acme/fmt) = %v, %v; want 1.1.0", got, err)
	}
	got.Close()

	_, _, err = fin.Find(context.Background(), Ref{"acme/fmt", "2.0.0"})
	want := "does-not-fit: E-WIT-LEVEL-001: acme/fmt@2.0.0 needs WIT level 3, and this mur serves level 2; no version of acme/fmt that this capsule may pull fits"
	if err == nil || err.Error() != want {
		t.Errorf("err = %v\nwant %s", err, want)
	}
	putTool(t, stores[0].Dir, "acme/fmt", "0.8.0", 1)
	_, _, err = fin.Find(context.Background(), Ref{"acme/fmt", "2.0.0"})
	want = "does-not-fit: E-WIT-LEVEL-001: acme/fmt@2.0.0 needs WIT level 3, and this mur serves level 2; the newest version that fits is 0.8.0: pull acme/fmt@0.8.0"
	if err == nil || err.Error() != want {
		t.Errorf("err = %v\nwant %s", err, want)
	}
	os.RemoveAll(filepath.Join(stores[0].Dir, "acme"))
	_, _, err = fin.Find(context.Background(), Ref{Name: "other/x"})
	want = "not-found: other/x is in none of the places this capsule may pull from (the project store, the global store); scope other has no source in .murmur/sources.yaml"
	if err == nil || err.Error() != want {
		t.Errorf("err = %v\nwant %s", err, want)
	}
	_, _, err = fin.Find(context.Background(), Ref{Name: "acme/none"})
	want = "not-found: acme/none is in none of the places this capsule may pull from (the project store, the global store); nor has github:acme/artifacts released it"
	if err == nil || err.Error() != want {
		t.Errorf("err = %v\nwant %s", err, want)
	}

	// Without sources in the grant, a version no store holds is not found.
	storesOnly := &Finder{Stores: stores}
	_, _, err = storesOnly.Find(context.Background(), Ref{"acme/fmt", "1.0.0"})
	want = "not-found: acme/fmt@1.0.0 is in none of the places this capsule may pull from (the project store, the global store); the versions they hold: 0.9.0"
	if err == nil || err.Error() != want {
		t.Errorf("err = %v\nwant %s", err, want)
	}
	if left, _ := os.ReadDir(fin.Fetcher.TempDir); len(left) > 0 {
		t.Errorf("fetches left %v", left)
	}
	for _, s := range stores {
		if _, err := os.Stat(filepath.Join(s.Dir, "acme", "fmt", "1.1.0")); err == nil {
			t.Errorf("a fetched artifact was written to the %s", s.Place)
		}
	}
}

func TestVersionsFromReleases(t *testing.T) {
	srv := newReleaseServer(t)
	srv.releases = []string{"fmt-v1.0.0", "fmt-v1.10.0", "fmt-v1.2.0", "fmt-v2.0.0-draft", "fmtx-v3.0.0", "lint-v1.0.0", "fmt-vbad"}
	got, err := srv.fetcher(t).Versions(context.Background(), acme, "acme/fmt")
	if diff := cmp.Diff([]string{"1.10.0", "1.2.0", "1.0.0"}, got); diff != "" || err != nil {
		t.Errorf("Versions (-want +got):\n%s%v", diff, err)
	}
}

func TestGitHubBase(t *testing.T) {
	if b := GitHubBase(env()); b != "https://github.com" {
		t.Errorf("default base %s", b)
	}
	if b := GitHubBase(env("MUR_GITHUB_BASE", "http://127.0.0.1:9/")); b != "http://127.0.0.1:9" {
		t.Errorf("base %s", b)
	}
	f := &Fetcher{}
	if u := f.ReleaseURL(acme, Ref{"acme/fmt", "1.2.3"}); u != "https://github.com/acme/artifacts/releases/download/fmt-v1.2.3/artifact.tar.gz" {
		t.Errorf("release URL %s", u)
	}
	if a := f.apiBase(); a != "https://api.github.com" {
		t.Errorf("API base %s", a)
	}
}

func TestParseSources(t *testing.T) {
	got, err := ParseSources("sources.yaml", []byte("acme: github:acme/murmur-artifacts\nlocal: github:me/tools.x\n"))
	if diff := cmp.Diff(Sources{"acme": {"acme", "murmur-artifacts"}, "local": {"me", "tools.x"}}, got); diff != "" || err != nil {
		t.Errorf("ParseSources (-want +got):\n%s%v", diff, err)
	}
	_, err = ParseSources(".murmur/sources.yaml", []byte("acme: gitlab:acme/x\nAcme: github:a/b\nacme2: [github:a/b]\n"))
	want := `.murmur/sources.yaml:1: the source of scope acme, "gitlab:acme/x", is not github:<owner>/<repo>; write acme: github:<owner>/<repo>, such as acme: github:acme/murmur-artifacts
.murmur/sources.yaml:2: "Acme" is not a scope; write the scope, the part of a full name before /, such as acme: github:acme/murmur-artifacts
.murmur/sources.yaml:3: acme2 must be a single value, not a list; write the value on the same line, such as acme2: value (quote text that holds ": ")`
	if err == nil || err.Error() != want {
		t.Errorf("err = %v\nwant %s", err, want)
	}
	if s, err := ReadSources(filepath.Join(t.TempDir(), "sources.yaml")); err != nil || len(s) != 0 {
		t.Errorf("a missing sources.yaml: %v, %v", s, err)
	}
}
