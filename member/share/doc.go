// Package share is share-file and fetch-peer-file (SPEC): minting a handle for a file under the
// capsule's export root, and redeeming a peer's handle at its door, checking everything that can be
// checked before the request, and storing the bytes in the workdir only once they match the handle's
// SHA-256. The session builds one Files from a Config of plain values and hands it to runtimetools as
// its FileSharer and PeerFileFetcher. On a member's replicas (DESIGN §16) share-file also copies the file
// into the store the replicas share (PeerFileKeeper), from where the door of any replica serves it.
//
// Concurrency: a *Files is read-only after New and safe for concurrent use; each fetch writes its own
// temporary file.
//
// Imports: capsule, roster, peerfile, internal/peercred, member/store (the shared files' limit and
// errors) and runtimetools; never member.
package share
