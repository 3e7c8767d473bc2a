package artifact

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/murmur-run/murmur/internal/yamldoc"
)

// Source is a scope's GitHub repository, written github:<owner>/<repo>.
type Source struct {
	Owner string
	Repo  string
}

// String writes s as github:<owner>/<repo>.
func (s Source) String() string { return "github:" + s.Owner + "/" + s.Repo }

// Place returns s as murmur.lock's source and pull-artifact's fetched_from write it.
func (s Source) Place() Place { return Place(s.String()) }

var (
	ghOwnerRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,38})$`)
	ghRepoRE  = regexp.MustCompile(`^[A-Za-z0-9._-]{1,100}$`)
)

// ParseSource validates s as github:<owner>/<repo>.
func ParseSource(s string) (Source, error) {
	rest, ok := strings.CutPrefix(s, "github:")
	owner, repo, slash := strings.Cut(rest, "/")
	if !ok || !slash || !ghOwnerRE.MatchString(owner) || !ghRepoRE.MatchString(repo) || repo == "." || repo == ".." {
		return Source{}, &NameError{s, fmt.Sprintf("%q is not a source", s), "write github:<owner>/<repo>, such as github:acme/murmur-artifacts"}
	}
	return Source{owner, repo}, nil
}

// SourcesFile is the name of the file mapping scopes to sources, beside the project store.
const SourcesFile = "sources.yaml"

// SourcesPath returns the sources.yaml of the project in dir: dir/.murmur/sources.yaml.
func SourcesPath(dir string) string { return filepath.Join(dir, ".murmur", SourcesFile) }

// Sources maps a scope to its GitHub source.
type Sources map[string]Source

// ReadSources reads the sources.yaml at path; a missing file maps no scope.
func ReadSources(path string) (Sources, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Sources{}, nil
	}
	if err != nil {
		return nil, &Error{File: path, Msg: "cannot be read: " + errText(err), Fix: "make the file readable"}
	}
	return ParseSources(path, data)
}

// ParseSources parses data as the sources.yaml at path: a mapping of scope to github:<owner>/<repo>,
// such as acme: github:acme/murmur-artifacts. Every problem is an *Error with its line.
func ParseSources(path string, data []byte) (Sources, error) {
	d := &yamlDoc{Doc: yamldoc.Doc{File: path}}
	out := Sources{}
	root := d.Root(data, "one line per scope, such as acme: github:acme/murmur-artifacts")
	if root == nil {
		return nil, d.Err()
	}
	d.Walk(root, "", func(k, v *yaml.Node) {
		if !partRE.MatchString(k.Value) || len(k.Value) > maxPartLen {
			d.Add(k.Line, fmt.Sprintf("%q is not a scope", k.Value), "write the scope, the part of a full name before /, such as acme: github:acme/murmur-artifacts")
			return
		}
		s, ok := d.Text(v, k.Value)
		if !ok {
			return
		}
		src, err := ParseSource(s)
		if err != nil {
			d.Add(yamldoc.Deref(v).Line, fmt.Sprintf("the source of scope %s, %q, is not github:<owner>/<repo>", k.Value, s),
				fmt.Sprintf("write %s: github:<owner>/<repo>, such as %s: github:acme/murmur-artifacts", k.Value, k.Value))
			return
		}
		out[k.Value] = src
	})
	if err := d.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// DefaultGitHubBase is where releases are fetched from unless MUR_GITHUB_BASE says otherwise.
const DefaultGitHubBase = "https://github.com"

// GitHubBase returns MUR_GITHUB_BASE when getenv gives it (without a trailing /), else DefaultGitHubBase.
func GitHubBase(getenv func(string) string) string {
	if b := strings.TrimRight(getenv("MUR_GITHUB_BASE"), "/"); b != "" {
		return b
	}
	return DefaultGitHubBase
}

// The bounds of one fetch, when the Fetcher sets none.
const (
	DefaultMaxArchiveBytes  = 64 << 20
	DefaultMaxUnpackedBytes = 256 << 20
	DefaultMaxFiles         = 10_000
	maxSumBytes             = 4 << 10
	maxAPIBytes             = 4 << 20
)

// Fetcher fetches releases from GitHub sources. A release of name@version (name's tool part) is the
// asset <base>/<owner>/<repo>/releases/download/<name>-v<version>/artifact.tar.gz and its sha256 in
// artifact.tar.gz.sha256 (the hex digest, optionally followed by a file name, as sha256sum writes it).
// The owner id a source answers for is the owner.id of the repository in GitHub's REST API:
// https://api.github.com/repos/<owner>/<repo> for the default base, <base>/api/v3/repos/<owner>/<repo>
// (GitHub Enterprise Server's layout) for any other, which is what tests serve on loopback.
type Fetcher struct {
	Base   string       // DefaultGitHubBase when ""
	Client *http.Client // a client with a 2-minute timeout when nil
	// TempDir is where fetched artifacts are unpacked ("" for the system's); nothing is written to a store.
	TempDir          string
	MaxArchiveBytes  int64 // DefaultMaxArchiveBytes when 0
	MaxUnpackedBytes int64 // DefaultMaxUnpackedBytes when 0
	MaxFiles         int   // DefaultMaxFiles when 0
}

func (f *Fetcher) base() string {
	if f.Base == "" {
		return DefaultGitHubBase
	}
	return strings.TrimRight(f.Base, "/")
}

func (f *Fetcher) apiBase() string {
	if b := f.base(); b != DefaultGitHubBase {
		return b + "/api/v3"
	}
	return "https://api.github.com"
}

func (f *Fetcher) client() *http.Client {
	if f.Client != nil {
		return f.Client
	}
	return &http.Client{Timeout: 2 * time.Minute}
}

// ReleaseURL returns where the archive of ref is fetched from.
func (f *Fetcher) ReleaseURL(src Source, ref Ref) string {
	return fmt.Sprintf("%s/%s/%s/releases/download/%s-v%s/artifact.tar.gz", f.base(), src.Owner, src.Repo, ref.Name.Tool(), ref.Version)
}

// errHTTPNotFound is a 404: the source holds no such release.
var errHTTPNotFound = errors.New("404 Not Found")

// get fetches url into w, at most limit bytes.
func (f *Fetcher) get(ctx context.Context, url string, accept string, w io.Writer, limit int64) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("User-Agent", "mur")
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := f.client().Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return fmt.Errorf("GET %s: %w", url, errHTTPNotFound)
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	n, err := io.Copy(w, io.LimitReader(resp.Body, limit+1))
	switch {
	case err != nil:
		return fmt.Errorf("GET %s: %w", url, err)
	case n > limit:
		return fmt.Errorf("GET %s: more than %d bytes", url, limit)
	}
	return nil
}

// OwnerID returns the GitHub owner id src answers for.
func (f *Fetcher) OwnerID(ctx context.Context, src Source) (int64, error) {
	var b strings.Builder
	url := fmt.Sprintf("%s/repos/%s/%s", f.apiBase(), src.Owner, src.Repo)
	if err := f.get(ctx, url, "application/vnd.github+json", &b, maxAPIBytes); err != nil {
		return 0, err
	}
	var repo struct {
		Owner struct {
			ID int64 `json:"id"`
		} `json:"owner"`
	}
	if err := json.Unmarshal([]byte(b.String()), &repo); err != nil || repo.Owner.ID <= 0 {
		return 0, fmt.Errorf("GET %s: the answer has no owner.id", url)
	}
	return repo.Owner.ID, nil
}

// Versions returns the versions of name src has released (tags <name>-v<version>, drafts left out),
// from its 100 newest releases, newest first (semver order).
func (f *Fetcher) Versions(ctx context.Context, src Source, name Name) ([]string, error) {
	var b strings.Builder
	url := fmt.Sprintf("%s/repos/%s/%s/releases?per_page=100", f.apiBase(), src.Owner, src.Repo)
	if err := f.get(ctx, url, "application/vnd.github+json", &b, maxAPIBytes); err != nil {
		return nil, err
	}
	var releases []struct {
		Tag   string `json:"tag_name"`
		Draft bool   `json:"draft"`
	}
	if err := json.Unmarshal([]byte(b.String()), &releases); err != nil {
		return nil, fmt.Errorf("GET %s: the answer is not a list of releases: %w", url, err)
	}
	var out []string
	for _, r := range releases {
		if v, ok := strings.CutPrefix(r.Tag, name.Tool()+"-v"); ok && !r.Draft && ValidVersion(v) {
			out = append(out, v)
		}
	}
	slices.SortFunc(out, func(a, b string) int { return CompareVersions(b, a) })
	return slices.Compact(out), nil
}

// Fetched is an artifact fetched from a source and unpacked into a temporary directory; Close removes
// it. Nothing of it is in any store.
type Fetched struct {
	*Artifact
	tmp string
}

// Close removes the fetched artifact's files.
func (f *Fetched) Close() error { return os.RemoveAll(f.tmp) }

// Fetch fetches ref (with a version) from src, the source of ref's scope, whose owner murmur.lock
// records as recorded (0: none yet). In order: the owner src answers for (E-REG-010 when recorded is
// another), the release's .sha256, the archive (bounded, checked against it), the archive unpacked into
// a temporary directory (entries with .., absolute paths, links, devices, repeated entries refused; size
// and count bounded; nothing written outside it), then the artifact as LoadDir checks a stored one,
// against ref. A failure is a *Refusal: not-found for a release src does not have, not-granted for a
// role that disagrees with its payload, not-fetched otherwise (with E-REG-010 for the owner).
func (f *Fetcher) Fetch(ctx context.Context, src Source, ref Ref, recorded int64) (*Fetched, error) {
	if ref.Version == "" {
		return nil, fmt.Errorf("fetching %s: a fetch needs a version", ref)
	}
	notFetched := func(format string, args ...any) *Refusal {
		return &Refusal{Kind: NotFetched, Msg: fmt.Sprintf("%s from %s: ", ref, src) + fmt.Sprintf(format, args...)}
	}
	owner, err := f.OwnerID(ctx, src)
	if err != nil {
		r := notFetched("the source could not be read: %v", err)
		r.Err = err
		return nil, r
	}
	if recorded != 0 && owner != recorded {
		oe := &OwnerError{Scope: ref.Name.Scope(), Source: src, Recorded: recorded, Got: owner}
		return nil, &Refusal{Kind: NotFetched, Code: CodeOwner, Msg: strings.TrimPrefix(oe.Error(), CodeOwner+": "), Err: oe}
	}
	url := f.ReleaseURL(src, ref)
	var sumText strings.Builder
	if err := f.get(ctx, url+".sha256", "", &sumText, maxSumBytes); err != nil {
		if errors.Is(err, errHTTPNotFound) {
			return nil, &Refusal{Kind: NotFound, Msg: fmt.Sprintf("%s has no release %s-v%s (%s)", src, ref.Name.Tool(), ref.Version, err), Err: err}
		}
		return nil, notFetched("the release could not be read: %v", err)
	}
	fields := strings.Fields(sumText.String())
	if len(fields) == 0 || len(fields[0]) != 64 || !isHex(fields[0]) {
		return nil, notFetched("%s.sha256 holds no sha256 (64 hex digits)", url)
	}
	want := strings.ToLower(fields[0])

	tmp, err := os.MkdirTemp(f.TempDir, "mur-fetch-")
	if err != nil {
		return nil, fmt.Errorf("fetching %s: %w", ref, err)
	}
	ok := false
	defer func() {
		if !ok {
			_ = os.RemoveAll(tmp) // cleanup on a failed path: the error returned is the one to report
		}
	}()
	archive, err := os.Create(filepath.Join(tmp, "artifact.tar.gz"))
	if err != nil {
		return nil, fmt.Errorf("fetching %s: %w", ref, err)
	}
	h := sha256.New()
	maxArchive := cmpOr(f.MaxArchiveBytes, DefaultMaxArchiveBytes)
	err = f.get(ctx, url, "", io.MultiWriter(archive, h), maxArchive)
	closeErr := archive.Close() // the last word on whether the archive reached the disk
	if err != nil {
		if errors.Is(err, errHTTPNotFound) {
			return nil, &Refusal{Kind: NotFound, Msg: fmt.Sprintf("%s has no release %s-v%s (%s)", src, ref.Name.Tool(), ref.Version, err), Err: err}
		}
		return nil, notFetched("the release could not be read: %v", err)
	}
	if closeErr != nil {
		return nil, fmt.Errorf("fetching %s: writing the archive: %w", ref, closeErr)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return nil, notFetched("the archive's sha256 is %s, but the release's artifact.tar.gz.sha256 says %s", got, want)
	}
	dir := filepath.Join(tmp, "artifact")
	if err := f.unpack(filepath.Join(tmp, "artifact.tar.gz"), dir); err != nil {
		return nil, notFetched("the archive was refused: %v", err)
	}
	a, err := loadDir(dir, ref, "the release it was fetched as")
	if err != nil {
		if isPayload(err) {
			return nil, &Refusal{Kind: NotGranted, Msg: fmt.Sprintf("%s from %s is not what its murmur.yaml says it is:\n%s", ref, src, err), Err: err}
		}
		return nil, &Refusal{Kind: NotFetched, Msg: fmt.Sprintf("%s from %s failed a check:\n%s", ref, src, err), Err: err}
	}
	a.Place, a.Owner = src.Place(), owner
	// Unpacked now; left, it goes with tmp when the Fetched is closed.
	_ = os.Remove(filepath.Join(tmp, "artifact.tar.gz"))
	ok = true
	return &Fetched{Artifact: a, tmp: tmp}, nil
}

func isHex(s string) bool {
	_, err := hex.DecodeString(s)
	return err == nil && s != ""
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// unpack writes the gzipped tar archive at path into dir (created), through an os.Root on dir, so that
// nothing lands outside it whatever the entries say.
func (f *Fetcher) unpack(path, dir string) error {
	in, err := os.Open(path)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }() // only read
	zr, err := gzip.NewReader(in)
	if err != nil {
		return fmt.Errorf("not a gzip file: %w", err)
	}
	defer zr.Close()
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	maxBytes := cmpOr(f.MaxUnpackedBytes, DefaultMaxUnpackedBytes)
	maxFiles := cmpOr(f.MaxFiles, DefaultMaxFiles)
	tr := tar.NewReader(zr)
	seen := map[string]bool{}
	var total int64
	for count := 0; ; count++ {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("not a tar archive: %w", err)
		}
		if count >= maxFiles {
			return fmt.Errorf("it has more than %d entries", maxFiles)
		}
		name := strings.TrimPrefix(hdr.Name, "./")
		name = strings.TrimSuffix(name, "/")
		if name == "" || name == "." {
			continue // the archive's own top directory
		}
		if !filepath.IsLocal(name) || strings.Contains(name, `\`) || filepath.Clean(name) != name {
			return fmt.Errorf("entry %q is not a plain path inside the artifact (.., an absolute path, or an unclean one)", hdr.Name)
		}
		if seen[name] {
			return fmt.Errorf("entry %q appears twice", hdr.Name)
		}
		seen[name] = true
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(name, 0o755); err != nil {
				return fmt.Errorf("entry %q: %w", hdr.Name, err)
			}
		case tar.TypeReg:
			if total+hdr.Size > maxBytes || hdr.Size < 0 {
				return fmt.Errorf("it unpacks to more than %d bytes", maxBytes)
			}
			if d := filepath.Dir(name); d != "." {
				if err := root.MkdirAll(d, 0o755); err != nil {
					return fmt.Errorf("entry %q: %w", hdr.Name, err)
				}
			}
			out, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
			if err != nil {
				return fmt.Errorf("entry %q: %w", hdr.Name, err)
			}
			n, err := io.Copy(out, io.LimitReader(tr, hdr.Size))
			cerr := out.Close()
			if err == nil && n != hdr.Size {
				err = io.ErrUnexpectedEOF
			}
			if err != nil || cerr != nil {
				return fmt.Errorf("entry %q: %w", hdr.Name, errors.Join(err, cerr))
			}
			total += n
		case tar.TypeXGlobalHeader:
			continue // metadata of the whole archive, such as git archive's commit id
		case tar.TypeSymlink:
			return fmt.Errorf("entry %q is a symbolic link; an artifact holds regular files and directories only", hdr.Name)
		case tar.TypeLink:
			return fmt.Errorf("entry %q is a hard link; an artifact holds regular files and directories only", hdr.Name)
		case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
			return fmt.Errorf("entry %q is a device or a pipe; an artifact holds regular files and directories only", hdr.Name)
		default:
			return fmt.Errorf("entry %q is of tar type %q; an artifact holds regular files and directories only", hdr.Name, string(hdr.Typeflag))
		}
	}
	return nil
}
