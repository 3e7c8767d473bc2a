// Package artifact is the vocabulary of artifacts (DESIGN §10, SPEC "pull-artifact", "remove-artifact",
// "Reserved names"): what the session core, pull-artifact, remove-artifact and mur pull / mur list share.
//
//   - Names: a full name scope/name (Name), pinned scope/name@version (Ref); the tool name is the part
//     after '/'. Patterns (Pattern) are a full name or a prefix ending in '*' (local/*). Versions are
//     semver without a leading v, ordered by CompareVersions and SortVersions.
//   - Stores (Store): the project store .murmur/store/ beside the roster or capsule, then the global store
//     (~/.murmur/store/, or MUR_STORE_DIR), laid out STORE/scope/name/version/. Resolve looks an artifact
//     up in that order; Catalog lists what a pattern matches.
//   - The artifact murmur.yaml (Manifest, ParseManifest), strict: unknown keys and wrong types are errors
//     with file:line and the fix. LoadDir checks a directory: manifest, name and version against the
//     directory, the payload the role needs, the digest (Digest: sha256 over the files in name order,
//     each file as its path and its bytes, both length-prefixed, "sha256:<hex>"; links and special files refused).
//   - murmur.lock (Lock): pins sorted by name and per scope the GitHub owner id first fetched from.
//     ReadLock/ParseLock read it strictly; UpdateLock changes it under a flock on a sibling file and
//     writes it atomically (WriteLock), so concurrent sessions lose no pin and a crash leaves the old or
//     the new file, never a torn one.
//   - Sources (Sources, Fetcher): a scope's github:<owner>/<repo>; a release is fetched, checked and
//     unpacked into a temporary directory, never into a store. Finder combines stores and sources.
//   - The grant (Grant: capabilities.install), the dispatch Allowlist, and Skill sections of the system
//     prompt.
//   - Declared artifacts (Declared, StageDeclared): murmur.yaml's tools:, skills: and hooks: resolved,
//     verified against murmur.lock and pinned with origin operator, as staging and mur check do, each
//     problem a *DeclaredError with its staging code.
//   - The Installer: what answers pull-artifact and remove-artifact for one session (it implements
//     runtimetools.ArtifactPuller and ArtifactRemover): SPEC's checks in order, a refusal writing
//     nothing, the copy into the runtime directory, the allowlist, and the changes the session collects
//     before its next inference call (Changes) and the tools removed in it (Removed).
//
// Errors: file problems are *Error (FILE:LINE: what is wrong; what to write instead), joined in line
// order. What pull-artifact and remove-artifact return to the model is a *Refusal whose Error() is the
// whole text, opening with SPEC's token (not-granted:, not-found:, does-not-fit:, not-fetched:,
// not-removable:); errors.Is matches ErrNotGranted and the other sentinels. A pin at another version or
// digest is a *ConflictError (SPEC's "murmur.lock conflict for '<name>': …"); a reserved tool name a
// *ReservedError (E-CAP-013); a source answering for another owner an *OwnerError (E-REG-010).
//
// Concurrency: Allowlist and Installer are safe for concurrent use; UpdateLock is safe across goroutines
// and processes; everything else is plain values or reads the file system without caching. The package keeps no state
// of its own: the environment and the home directory are passed in.
package artifact
