package artifact

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/murmur-run/murmur/internal/yamldoc"
)

// Place is where an artifact was found, as murmur.lock's source and pull-artifact's fetched_from write
// it: "project store", "global store" or "github:<owner>/<repo>".
type Place string

// The two stores.
const (
	ProjectStore Place = "project store"
	GlobalStore  Place = "global store"
)

// Store is a directory of artifacts laid out STORE/scope/name/version/.
type Store struct {
	Place Place
	Dir   string
}

// ProjectStoreDir returns the project store of the project in dir (the roster's directory, or the
// capsule's outside a formation): dir/.murmur/store.
func ProjectStoreDir(dir string) string { return filepath.Join(dir, ".murmur", "store") }

// GlobalStoreDir returns the global store: MUR_STORE_DIR when getenv gives it, else home/.murmur/store;
// "" when neither is known.
func GlobalStoreDir(getenv func(string) string, home string) string {
	if d := getenv("MUR_STORE_DIR"); d != "" {
		return d
	}
	if home == "" {
		return ""
	}
	return filepath.Join(home, ".murmur", "store")
}

// Stores returns the stores of the project in dir in look-up order: the project store, then the global
// store (left out when GlobalStoreDir knows none, or when it is the project store itself).
func Stores(dir string, getenv func(string) string, home string) []Store {
	out := []Store{{ProjectStore, ProjectStoreDir(dir)}}
	if g := GlobalStoreDir(getenv, home); g != "" && !samePath(g, out[0].Dir) {
		out = append(out, Store{GlobalStore, g})
	}
	return out
}

func samePath(a, b string) bool {
	aa, err1 := filepath.Abs(a)
	bb, err2 := filepath.Abs(b)
	return err1 == nil && err2 == nil && aa == bb
}

// Path returns the directory of ref (which has a version) in s.
func (s Store) Path(ref Ref) string {
	return filepath.Join(s.Dir, ref.Name.Scope(), ref.Name.Tool(), ref.Version)
}

// Versions returns the versions of name that s holds, newest first (semver order); none when s has no
// such directory. Entries that are not versions are not artifacts and are left out.
func (s Store) Versions(name Name) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(s.Dir, name.Scope(), name.Tool()))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if (e.IsDir() || e.Type()&fs.ModeSymlink != 0) && ValidVersion(e.Name()) {
			out = append(out, e.Name())
		}
	}
	slices.SortFunc(out, func(a, b string) int { return CompareVersions(b, a) })
	return out, nil
}

// Names returns the names s holds that p matches, sorted.
func (s Store) Names(p Pattern) ([]Name, error) {
	scopes, err := os.ReadDir(s.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Name
	for _, sc := range scopes {
		if !sc.IsDir() || !partRE.MatchString(sc.Name()) {
			continue
		}
		probe, _ := ParsePattern(sc.Name() + "/*")
		if !probe.Overlaps(p) {
			continue
		}
		names, err := os.ReadDir(filepath.Join(s.Dir, sc.Name()))
		if err != nil {
			return out, err
		}
		for _, n := range names {
			full := Name(sc.Name() + "/" + n.Name())
			if n.IsDir() && partRE.MatchString(n.Name()) && len(n.Name()) <= maxPartLen && p.Match(full) {
				out = append(out, full)
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// Artifact is an artifact checked and ready to use: its manifest agrees with its directory and payload,
// and Digest is what its files digest to now.
type Artifact struct {
	Manifest *Manifest
	Dir      string
	Digest   string
	Place    Place
	Owner    int64 // the GitHub owner id of the source it was fetched from; 0 from a store
}

// Ref returns the artifact's name and version.
func (a *Artifact) Ref() Ref { return Ref{a.Manifest.Name, a.Manifest.Version} }

// Fits reports whether this mur serves the artifact's WIT level.
func (a *Artifact) Fits() bool { return a.Manifest.Fits() }

// Pin returns the murmur.lock entry pinning a, made by origin.
func (a *Artifact) Pin(origin Origin) Pin {
	return Pin{Name: a.Manifest.Name, Version: a.Manifest.Version, Digest: a.Digest, Origin: origin, Source: a.Place, Owner: a.Owner}
}

// LoadDir reads and checks the artifact in dir, which must be want (a name with a version): its
// murmur.yaml (strict), the name and version in it against want, the files its role needs, and its
// digest. It does not check the WIT level: see Artifact.Fits.
func LoadDir(dir string, want Ref) (*Artifact, error) {
	return loadDir(dir, want, "the directory it is in")
}

func loadDir(dir string, want Ref, where string) (*Artifact, error) {
	fi, err := os.Lstat(dir)
	switch {
	case err != nil:
		return nil, &Error{File: dir, Msg: "cannot be read: " + errText(err), Fix: "check the artifact directory"}
	case !fi.IsDir():
		return nil, &Error{File: dir, Msg: "is " + describeMode(fi.Mode()) + ", not a directory", Fix: "put the artifact's files in a directory there"}
	}
	m, err := readManifest(dir)
	if err != nil {
		return nil, err
	}
	d := &yamlDoc{Doc: yamldoc.Doc{File: m.file}}
	if m.Name != want.Name {
		d.Add(m.lines["name"], fmt.Sprintf("name %s does not match %s, %s", m.Name, where, want),
			fmt.Sprintf("write name: %s, or put the artifact where %s belongs", want.Name, m.Name))
	}
	if m.Version != want.Version {
		d.Add(m.lines["version"], fmt.Sprintf("version %s does not match %s, %s", m.Version, where, want),
			fmt.Sprintf("write version: %s, or put the artifact where version %s belongs", want.Version, m.Version))
	}
	if err := d.Err(); err != nil {
		return nil, err
	}
	if err := m.checkPayload(dir); err != nil {
		return nil, err
	}
	digest, err := Digest(dir)
	if err != nil {
		return nil, err
	}
	return &Artifact{Manifest: m, Dir: dir, Digest: digest}, nil
}

// held is where each version of one name is, in look-up order.
type held struct {
	name     Name
	versions []string           // newest first, in the order a pull without a version tries them
	stores   map[string][]Store // version -> the stores holding it, in look-up order
}

func lookup(stores []Store, name Name) (held, []string) {
	h := held{name: name, stores: map[string][]Store{}}
	var notes []string
	for _, s := range stores {
		vs, err := s.Versions(name)
		if err != nil {
			notes = append(notes, fmt.Sprintf("the %s (%s) could not be read: %s", s.Place, s.Dir, errText(err)))
			continue
		}
		for _, v := range vs {
			if len(h.stores[v]) == 0 {
				h.versions = append(h.versions, v)
			}
			h.stores[v] = append(h.stores[v], s)
		}
	}
	SortVersions(h.versions)
	return h, notes
}

// Resolve finds ref in stores, in their order, and checks it. With a version, the first store holding
// it answers; without one, the newest version any store holds whose manifest fits this mur (releases
// before prereleases), from the first store holding that version. notes says which stores could not be
// read (the look-up went ahead without them). A failure is a *Refusal: not-found (no store holds it, or
// the copy found is broken), not-granted (its role disagrees with its payload) or does-not-fit
// (E-WIT-LEVEL-001, naming the newest version that fits).
func Resolve(stores []Store, ref Ref) (*Artifact, []string, error) {
	h, notes := lookup(stores, ref.Name)
	if ref.Version != "" {
		in := h.stores[ref.Version]
		if len(in) == 0 {
			return nil, notes, notFound(stores, ref, h.versions)
		}
		a, err := loadIn(in[0], ref)
		if err != nil {
			return nil, notes, err
		}
		if !a.Fits() {
			return nil, notes, notFitting(a.Manifest, h.newestFitting(ref.Version))
		}
		return a, notes, nil
	}
	if len(h.versions) == 0 {
		return nil, notes, notFound(stores, ref, nil)
	}
	var newest *Manifest
	for _, v := range h.versions {
		s := h.stores[v][0]
		r := Ref{ref.Name, v}
		m, err := readManifest(s.Path(r))
		if err != nil {
			return nil, notes, broken(s, r, err)
		}
		if newest == nil {
			newest = m
		}
		if m.Fits() {
			a, err := loadIn(s, r)
			return a, notes, err
		}
	}
	return nil, notes, noneFits(newest)
}

// loadIn loads ref from s, turning a failure into its refusal.
func loadIn(s Store, ref Ref) (*Artifact, error) {
	a, err := LoadDir(s.Path(ref), ref)
	if err != nil {
		return nil, broken(s, ref, err)
	}
	a.Place = s.Place
	return a, nil
}

// newestFitting returns the newest version other than skip whose manifest fits, "" when none does. A
// version whose manifest cannot be read is passed over: this only names an alternative.
func (h held) newestFitting(skip string) string {
	for _, v := range h.versions {
		if v == skip {
			continue
		}
		m, err := readManifest(h.stores[v][0].Path(Ref{h.name, v}))
		if err == nil && m.Fits() {
			return v
		}
	}
	return ""
}

func notFound(stores []Store, ref Ref, versions []string) *Refusal {
	places := make([]string, len(stores))
	for i, s := range stores {
		places[i] = "the " + string(s.Place)
	}
	r := refuse(NotFound, "%s is in none of the places this capsule may pull from (%s)", ref, strings.Join(places, ", "))
	if len(versions) > 0 {
		r.Msg += "; the versions they hold: " + strings.Join(versions, ", ")
	}
	return r
}

// broken is the refusal for a copy that is there but cannot be used.
func broken(s Store, ref Ref, err error) *Refusal {
	if isPayload(err) {
		return &Refusal{Kind: NotGranted, Msg: fmt.Sprintf("%s in the %s is not what its murmur.yaml says it is:\n%s", ref, s.Place, err), Err: err}
	}
	return &Refusal{Kind: NotFound, Msg: fmt.Sprintf("the copy of %s in the %s cannot be used:\n%s", ref, s.Place, err), Err: err}
}

// notFitting is the does-not-fit refusal for m, naming newest, the newest version that fits ("" none).
func notFitting(m *Manifest, newest string) *Refusal {
	r := &Refusal{Kind: DoesNotFit, Code: CodeWITLevel, NewestFitting: newest,
		Msg: fmt.Sprintf("%s@%s needs WIT level %d, and this mur serves level %d", m.Name, m.Version, m.WITLevel, ServedWITLevel)}
	if newest != "" {
		r.Msg += fmt.Sprintf("; the newest version that fits is %s: pull %s@%s", newest, m.Name, newest)
	} else {
		r.Msg += "; no version of " + string(m.Name) + " that this capsule may pull fits"
	}
	return r
}

// noneFits is the does-not-fit refusal of a pull without a version when no version fits; newest is the
// newest version's manifest.
func noneFits(newest *Manifest) *Refusal {
	return &Refusal{Kind: DoesNotFit, Code: CodeWITLevel,
		Msg: fmt.Sprintf("no version of %s fits this mur, which serves WIT level %d; the newest, %s, needs level %d",
			newest.Name, ServedWITLevel, newest.Version, newest.WITLevel)}
}

// Entry is one artifact a pattern lists, as pull-artifact shows it.
type Entry struct {
	Name          Name
	Runtime       Runtime  // of the newest version; "" when its manifest cannot be read
	Description   string   // of the newest version
	Versions      []string // newest first (semver order)
	NewestFitting string   // "" when none fits
	HeldIn        []Place  // the stores holding any version, in look-up order
}

// Catalog lists what stores hold that p matches, sorted by name. notes says which places or manifests
// could not be read.
func Catalog(stores []Store, p Pattern) ([]Entry, []string) {
	var notes []string
	seen := map[Name]bool{}
	var names []Name
	for _, s := range stores {
		ns, err := s.Names(p)
		if err != nil {
			notes = append(notes, fmt.Sprintf("the %s (%s) could not be read: %s", s.Place, s.Dir, errText(err)))
		}
		for _, n := range ns {
			if !seen[n] {
				seen[n] = true
				names = append(names, n)
			}
		}
	}
	slices.Sort(names)
	var out []Entry
	for _, n := range names {
		h, hnotes := lookup(stores, n)
		notes = append(notes, hnotes...)
		if len(h.versions) == 0 {
			continue
		}
		e := Entry{Name: n, Versions: slices.Clone(h.versions)}
		slices.SortFunc(e.Versions, func(a, b string) int { return CompareVersions(b, a) })
		for _, s := range stores {
			for _, v := range h.versions {
				if slices.Contains(h.stores[v], s) {
					e.HeldIn = append(e.HeldIn, s.Place)
					break
				}
			}
		}
		// The preference order (releases first) decides which manifest describes the name, and which
		// version is the newest that fits: the one a pull without a version takes.
		described := false
		for _, v := range h.versions {
			m, err := readManifest(h.stores[v][0].Path(Ref{n, v}))
			if err != nil {
				notes = append(notes, fmt.Sprintf("%s@%s in the %s cannot be read: %s", n, v, h.stores[v][0].Place, oneLine(err)))
				continue
			}
			if !described {
				e.Runtime, e.Description, described = m.Runtime, m.Description, true
			}
			if m.Fits() {
				e.NewestFitting = v
				break
			}
		}
		out = append(out, e)
	}
	return out, notes
}

// oneLine joins the lines of an error's text with "; ", for a note.
func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", "; ") }
