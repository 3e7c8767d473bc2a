// Package peerfile holds what the two ends of a peer-file handoff share: the handle a member's share-file
// mints and another member's fetch-peer-file redeems at the issuer's door (GET /peer-files/{handle}), the
// key each member signs its handles with, the check of a file under an export root against the identity a
// handle names, the RFC 9530 Repr-Digest header the door streams a file with, and the one table that maps
// each failure to a wire reason and an HTTP status.
//
// A handle is "pf1." followed by the unpadded base64url encoding of a small binary payload (formation,
// issuing member, the file's path under the export root, its size, modification time and SHA-256, an
// expiry and a nonce) and the first 16 bytes of its HMAC-SHA256. The key is derived with HKDF-SHA256 from
// the formation's secret (its formation token) for one formation and one member, so a handle names who
// minted it and cannot be altered or re-attributed by anyone without the secret. A model sees handles,
// never the secret.
//
// Contract:
//
//   - The package imports the standard library only; member (minting, fetching) and server (redeeming)
//     both import it, and it imports nothing of murmur's, so DESIGN §9's arrows stay one-way.
//   - Decode accepts exactly the strings Handle.String produces: a decoded handle re-encodes to the same
//     text. Decode checks the form only; Handle.Verify checks the signature; the caller checks the
//     formation first (a handle of another formation is ErrWrongFormation, not ErrForged), then the member,
//     the signature and the expiry, in that order.
//   - Inspect and Open reach files only through os.Root, so no path, symbolic link or rename can lead
//     outside the root; they open without blocking and refuse anything that is not a regular file.
//   - Failures are sentinel errors matched with errors.Is; Reason and Status map them to the wire once, and
//     FromReason maps a door's reason back, so nobody matches error text.
//   - Everything here is safe for concurrent use; nothing holds state between calls.
package peerfile
