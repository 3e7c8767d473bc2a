package peerfile

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"
)

// Prefix opens every handle of this version.
const Prefix = "pf1."

// The bounds of a handle and of what it names.
const (
	macSize      = 16 // bytes of HMAC-SHA256 kept: half its output, RFC 2104's recommended minimum
	nonceSize    = 8
	maxName      = 255  // bytes of a formation or member name
	maxPath      = 4096 // bytes of a path under the export root
	MaxHandleLen = 8192 // characters of a handle, prefix included
)

// File is a file's identity: what a handle names, and what the door compares before it sends a byte.
type File struct {
	Path    string // relative to the export root, clean, slash-separated
	Size    int64
	ModTime int64 // Unix nanoseconds
	Digest  [sha256.Size]byte
}

// Handle is a decoded peer-file handle.
type Handle struct {
	Formation string
	Member    string // the member that minted it, whose door serves it
	File
	Expires int64 // Unix seconds; the handle is valid before this second
	Nonce   [nonceSize]byte
	MAC     [macSize]byte
}

// ExpiresAt returns when the handle stops working.
func (h *Handle) ExpiresAt() time.Time { return time.Unix(h.Expires, 0).UTC() }

// Expired reports whether the handle no longer works at now.
func (h *Handle) Expired(now time.Time) bool { return now.Unix() >= h.Expires }

// ID is the nonce in hex: it tells handles apart in records without repeating them.
func (h *Handle) ID() string { return fmt.Sprintf("%x", h.Nonce) }

// Key derives the key member of formation signs its handles with from the formation's secret.
func Key(secret, formation, member string) []byte {
	k, err := hkdf.Key(sha256.New, []byte(secret), nil, "murmur peer-file v1\x00"+formation+"\x00"+member, sha256.Size)
	if err != nil {
		panic("peerfile: HKDF of 32 bytes cannot fail: " + err.Error())
	}
	return k
}

// Mint returns a signed handle for f, minted by member of formation, valid until expires (rounded down to
// the second) and carrying a fresh random nonce.
func Mint(secret, formation, member string, f File, expires time.Time) *Handle {
	h := &Handle{Formation: formation, Member: member, File: f, Expires: expires.Unix()}
	rand.Read(h.Nonce[:])
	h.MAC = h.sum(secret)
	return h
}

// Verify reports ErrForged unless the handle's MAC is the one its formation's secret gives for its
// formation and member.
func (h *Handle) Verify(secret string) error {
	want := h.sum(secret)
	if !hmac.Equal(want[:], h.MAC[:]) {
		return ErrForged
	}
	return nil
}

func (h *Handle) sum(secret string) [macSize]byte {
	m := hmac.New(sha256.New, Key(secret, h.Formation, h.Member))
	m.Write([]byte(Prefix))
	m.Write(h.payload())
	var out [macSize]byte
	copy(out[:], m.Sum(nil))
	return out
}

func (h *Handle) payload() []byte {
	b := make([]byte, 0, 3*binary.MaxVarintLen16+len(h.Formation)+len(h.Member)+len(h.Path)+3*binary.MaxVarintLen64+sha256.Size+nonceSize)
	for _, s := range []string{h.Formation, h.Member, h.Path} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	b = binary.AppendUvarint(b, uint64(h.Size))
	b = binary.AppendVarint(b, h.ModTime)
	b = append(b, h.Digest[:]...)
	b = binary.AppendUvarint(b, uint64(h.Expires))
	return append(b, h.Nonce[:]...)
}

var encoding = base64.RawURLEncoding.Strict()

// String is the handle as members pass it: Prefix and the base64url of its payload and MAC.
func (h *Handle) String() string {
	return Prefix + encoding.EncodeToString(append(h.payload(), h.MAC[:]...))
}

// Decode parses a handle. It checks the form only, and reports every failure as ErrMalformed with what
// is wrong: it never says whether a handle is genuine (Verify does).
func Decode(s string) (*Handle, error) {
	bad := func(why string) (*Handle, error) { return nil, fmt.Errorf("%w: %s", ErrMalformed, why) }
	if !strings.HasPrefix(s, Prefix) {
		return bad("a handle starts with " + Prefix)
	}
	if len(s) > MaxHandleLen {
		return bad(fmt.Sprintf("it is %d characters long, more than a handle's %d", len(s), MaxHandleLen))
	}
	body := s[len(Prefix):]
	for i, c := range body {
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return bad(fmt.Sprintf("character %d is %q, which no handle holds", utf8.RuneCountInString(s[:len(Prefix)+i])+1, c))
		}
	}
	raw, err := encoding.DecodeString(body)
	if err != nil {
		return bad("it is cut short or altered")
	}
	if len(raw) < macSize {
		return bad("it is cut short")
	}
	h := &Handle{}
	copy(h.MAC[:], raw[len(raw)-macSize:])
	r := reader{b: raw[:len(raw)-macSize]}
	h.Formation = r.str(maxName)
	h.Member = r.str(maxName)
	h.Path = r.str(maxPath)
	h.Size = r.natural()
	h.ModTime = r.signed()
	r.bytes(h.Digest[:])
	h.Expires = r.natural()
	r.bytes(h.Nonce[:])
	switch {
	case r.bad || len(r.b) != 0:
		return bad("it is cut short or altered")
	case h.Formation == "" || h.Member == "":
		return bad("it names no formation or no member")
	case !utf8.ValidString(h.Formation) || !utf8.ValidString(h.Member):
		return bad("its names are not text")
	}
	if err := CheckPath(h.Path); err != nil || filepath.Clean(h.Path) != h.Path {
		return bad("the path it names is not a clean path inside an export root")
	}
	return h, nil
}

// reader reads a payload; any failure sets bad, and later reads return zero values.
type reader struct {
	b   []byte
	bad bool
}

// readVarint reads one varint with decode. Only the shortest encoding (encode's) is accepted, so a
// decoded handle re-encodes to the same text.
func readVarint[T uint64 | int64](r *reader, decode func([]byte) (T, int), encode func([]byte, T) []byte) T {
	if r.bad {
		return 0
	}
	v, n := decode(r.b)
	if n <= 0 || n != len(encode(nil, v)) {
		r.bad = true
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) uvarint() uint64 { return readVarint(r, binary.Uvarint, binary.AppendUvarint) }

func (r *reader) natural() int64 {
	v := r.uvarint()
	if v > math.MaxInt64 {
		r.bad = true
		return 0
	}
	return int64(v)
}

func (r *reader) signed() int64 { return readVarint(r, binary.Varint, binary.AppendVarint) }

func (r *reader) str(limit int) string {
	n := r.uvarint()
	if r.bad || n > uint64(limit) || n > uint64(len(r.b)) {
		r.bad = true
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

func (r *reader) bytes(dst []byte) {
	if r.bad || len(r.b) < len(dst) {
		r.bad = true
		return
	}
	copy(dst, r.b)
	r.b = r.b[len(dst):]
}
