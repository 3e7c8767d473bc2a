package artifact

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// Finder looks an artifact up in every place a capsule may pull from: its stores in order, then, when
// the grant allows sources, the GitHub source of the artifact's scope.
type Finder struct {
	Stores  []Store
	Sources Sources          // the project's .murmur/sources.yaml
	Fetcher *Fetcher         // nil: sources are not consulted (install.from: [stores])
	Owners  map[string]int64 // murmur.lock's recorded owner per scope
	// MaxFetches bounds the releases a pull without a version downloads looking for one that fits
	// (3 when 0).
	MaxFetches int
}

// Found is an artifact Find found. Close removes a fetched artifact's temporary files (and does nothing
// for a stored one): call it once the artifact has been copied where the session runs it.
type Found struct {
	*Artifact
	fetched *Fetched
}

// Close removes a fetched artifact's files.
func (f *Found) Close() error {
	if f.fetched != nil {
		return f.fetched.Close()
	}
	return nil
}

// Find finds and checks ref. The stores answer first; a source is consulted only when no store holds a
// version that can be taken: with a version, when no store holds it; without one, when no store holds
// a version that fits, and then only for versions no store holds, newest first (releases before
// prereleases). notes says which places could not be read. A failure is a *Refusal (see Resolve and
// Fetcher.Fetch).
func (f *Finder) Find(ctx context.Context, ref Ref) (*Found, []string, error) {
	a, notes, err := Resolve(f.Stores, ref)
	if err == nil {
		return &Found{Artifact: a}, notes, nil
	}
	var r *Refusal
	if f.Fetcher == nil || !errors.As(err, &r) || r.Err != nil {
		return nil, notes, err // a broken copy in a store is reported, not passed over
	}
	if r.Kind != NotFound && !(r.Kind == DoesNotFit && ref.Version == "") {
		return nil, notes, err
	}
	scope := ref.Name.Scope()
	src, ok := f.Sources[scope]
	if !ok {
		r.Msg += fmt.Sprintf("; scope %s has no source in .murmur/sources.yaml", scope)
		return nil, notes, r
	}
	if ref.Version != "" {
		got, err := f.Fetcher.Fetch(ctx, src, ref, f.Owners[scope])
		if err != nil {
			return nil, notes, err
		}
		if !got.Fits() {
			_ = got.Close() // a copy left in the temporary directory is litter: the refusal is what to report
			h, _ := lookup(f.Stores, ref.Name)
			return nil, notes, notFitting(got.Manifest, h.newestFitting(ref.Version))
		}
		return &Found{Artifact: got.Artifact, fetched: got}, notes, nil
	}
	versions, err := f.Fetcher.Versions(ctx, src, ref.Name)
	if err != nil {
		return nil, notes, &Refusal{Kind: NotFetched, Msg: fmt.Sprintf("%s from %s: the source's releases could not be read: %v", ref, src, err), Err: err}
	}
	h, _ := lookup(f.Stores, ref.Name)
	versions = slices.DeleteFunc(versions, func(v string) bool { return len(h.stores[v]) > 0 })
	if len(versions) == 0 {
		if r.Kind == NotFound {
			r.Msg += fmt.Sprintf("; nor has %s released it", src)
		}
		return nil, notes, r
	}
	SortVersions(versions)
	var newest *Manifest
	for i, v := range versions {
		if i == cmpOr(f.MaxFetches, 3) {
			break
		}
		got, err := f.Fetcher.Fetch(ctx, src, Ref{ref.Name, v}, f.Owners[scope])
		if err != nil {
			return nil, notes, err
		}
		if got.Fits() {
			return &Found{Artifact: got.Artifact, fetched: got}, notes, nil
		}
		if newest == nil {
			newest = got.Manifest
		}
		_ = got.Close() // a copy left in the temporary directory is litter: the refusal is what to report
	}
	return nil, notes, noneFits(newest)
}
