package peerfile

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const secret = "formation-token-for-tests"

func sample() File {
	return File{Path: "reports/q3.txt", Size: 1234, ModTime: 1_790_000_000_123_456_789, Digest: sha256.Sum256([]byte("q3"))}
}

func TestHandleRoundTrip(t *testing.T) {
	expires := time.Date(2026, 10, 20, 14, 0, 0, 0, time.UTC)
	h := Mint(secret, "hello", "lead", sample(), expires.Add(999*time.Millisecond))
	s := h.String()
	if !strings.HasPrefix(s, Prefix) {
		t.Fatalf("handle %q lacks the prefix %q", s, Prefix)
	}
	got, err := Decode(s)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(h, got); diff != "" {
		t.Errorf("decoded handle (-minted +decoded):\n%s", diff)
	}
	if err := got.Verify(secret); err != nil {
		t.Errorf("Verify of a minted handle: %v", err)
	}
	if !got.ExpiresAt().Equal(expires) {
		t.Errorf("expires at %s, want %s (rounded down to the second)", got.ExpiresAt(), expires)
	}
	if got.String() != s {
		t.Errorf("re-encoded %q, want %q", got.String(), s)
	}
	// Short enough for a model to copy: a typical handle is well under 150 characters.
	if len(s) > 150 {
		t.Errorf("handle is %d characters: %s", len(s), s)
	}
	if Mint(secret, "hello", "lead", sample(), expires).String() == Mint(secret, "hello", "lead", sample(), expires).String() {
		t.Error("two handles of the same file are equal: the nonce is missing")
	}
}

func TestExpiry(t *testing.T) {
	now := time.Date(2026, 10, 20, 14, 0, 0, 0, time.UTC)
	h := Mint(secret, "f", "lead", sample(), now.Add(time.Hour))
	for _, tc := range []struct {
		at   time.Time
		want bool
	}{
		{now, false},
		{now.Add(time.Hour - time.Nanosecond), false},
		{now.Add(time.Hour), true},
		{now.Add(2 * time.Hour), true},
	} {
		if got := h.Expired(tc.at); got != tc.want {
			t.Errorf("Expired(%s) = %v, want %v", tc.at, got, tc.want)
		}
	}
}

// TestEveryFlippedBitFails flips each bit of each byte a handle carries, and each character of its text
// to every other character a handle may hold: no altered handle decodes, verifies and names the same
// formation.
func TestEveryFlippedBitFails(t *testing.T) {
	h := Mint(secret, "hello", "lead", sample(), time.Now().Add(time.Hour))
	s := h.String()
	accepted := func(alt string) bool {
		d, err := Decode(alt)
		return err == nil && d.Formation == "hello" && d.Verify(secret) == nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(s[len(Prefix):])
	if err != nil {
		t.Fatal(err)
	}
	for i := range raw {
		for bit := range 8 {
			alt := append([]byte{}, raw...)
			alt[i] ^= 1 << bit
			if a := Prefix + base64.RawURLEncoding.EncodeToString(alt); accepted(a) {
				t.Errorf("byte %d bit %d flipped: %s still accepted", i, bit, a)
			}
		}
	}
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_."
	for i := range s {
		for _, c := range []byte(alphabet) {
			if c == s[i] {
				continue
			}
			alt := s[:i] + string(c) + s[i+1:]
			if accepted(alt) {
				t.Errorf("character %d changed to %q: %s still accepted", i, c, alt)
			}
		}
	}
	for _, alt := range []string{s[:len(s)-1], s + "A", s[1:], strings.ToUpper(s), " " + s, s + "\n"} {
		if accepted(alt) {
			t.Errorf("%q accepted", alt)
		}
	}
}

func TestAnotherFormation(t *testing.T) {
	h := Mint("other-secret", "other", "lead", sample(), time.Now().Add(time.Hour))
	d, err := Decode(h.String())
	if err != nil {
		t.Fatal(err)
	}
	if d.Formation != "other" {
		t.Errorf("formation %q: a handle of another formation must be told apart before its signature", d.Formation)
	}
	// The same formation name under another secret, and a formation name rewritten, are forgeries.
	if err := Mint("other-secret", "hello", "lead", sample(), time.Now()).Verify(secret); !errors.Is(err, ErrForged) {
		t.Errorf("another secret: %v, want ErrForged", err)
	}
	d.Formation = "hello"
	if err := d.Verify(secret); !errors.Is(err, ErrForged) {
		t.Errorf("formation rewritten: %v, want ErrForged", err)
	}
	// Re-attributing a handle to another member breaks its signature: each member has its own key.
	h2 := Mint(secret, "hello", "lead", sample(), time.Now())
	h2.Member = "worker"
	if err := h2.Verify(secret); !errors.Is(err, ErrForged) {
		t.Errorf("member rewritten: %v, want ErrForged", err)
	}
	if string(Key(secret, "hello", "lead")) == string(Key(secret, "hello", "worker")) {
		t.Error("two members share a key")
	}
}

// payloadHandle encodes fields as a handle without checking them, to build malformed ones.
func payloadHandle(formation, member, path string, tail []byte) string {
	var b []byte
	for _, s := range []string{formation, member, path} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	b = append(b, tail...)
	return Prefix + base64.RawURLEncoding.EncodeToString(b)
}

func validTail() []byte {
	var b []byte
	b = binary.AppendUvarint(b, 10)
	b = binary.AppendVarint(b, 5)
	b = append(b, make([]byte, 32)...)
	b = binary.AppendUvarint(b, 100)
	b = append(b, make([]byte, 8)...)
	return append(b, make([]byte, 16)...)
}

func TestDecodeRejects(t *testing.T) {
	good := payloadHandle("f", "lead", "a.txt", validTail())
	if _, err := Decode(good); err != nil {
		t.Fatalf("the well-formed base case does not decode: %v", err)
	}
	overlong := append([]byte{0x81, 0x00}, validTail()[1:]...) // size 1 written in two bytes
	for _, tc := range []struct{ name, handle string }{
		{"empty", ""},
		{"no prefix", strings.TrimPrefix(good, Prefix)},
		{"another version", "pf2." + strings.TrimPrefix(good, Prefix)},
		{"padding", good + "=="},
		{"a newline inside", good[:10] + "\n" + good[10:]},
		{"a space", good + " "},
		{"standard base64", strings.ReplaceAll(strings.ReplaceAll(good, "-", "+"), "_", "/") + "+"},
		{"one character short", good[:len(good)-1]},
		{"cut to the MAC", payloadHandle("", "", "", nil)[:len(Prefix)+4]},
		{"trailing bytes", payloadHandle("f", "lead", "a.txt", append(validTail(), 0))},
		{"no formation", payloadHandle("", "lead", "a.txt", validTail())},
		{"no member", payloadHandle("f", "", "a.txt", validTail())},
		{"empty path", payloadHandle("f", "lead", "", validTail())},
		{"absolute path", payloadHandle("f", "lead", "/etc/passwd", validTail())},
		{"dot-dot path", payloadHandle("f", "lead", "../x", validTail())},
		{"path out through a/../../x", payloadHandle("f", "lead", "a/../../x", validTail())},
		{"unclean path", payloadHandle("f", "lead", "a//b", validTail())},
		{"NUL in path", payloadHandle("f", "lead", "a\x00b", validTail())},
		{"name not text", payloadHandle("f\xff", "lead", "a.txt", validTail())},
		{"overlong varint", payloadHandle("f", "lead", "a.txt", overlong)},
		{"too long", Prefix + strings.Repeat("A", MaxHandleLen)},
		{"non-zero trailing bits", func() string {
			h := payloadHandle("f", "lead", "ab.txt", validTail()) // its base64 ends in a partial group
			const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
			i := strings.IndexByte(alphabet, h[len(h)-1])
			return h[:len(h)-1] + string(alphabet[i^1])
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := Decode(tc.handle)
			if !errors.Is(err, ErrMalformed) {
				t.Errorf("Decode(%q) = %+v, %v; want ErrMalformed", tc.handle, h, err)
			}
		})
	}
}

func TestWireTable(t *testing.T) {
	for _, w := range wire {
		if got := FromReason(Reason(w.err)); got != w.err {
			t.Errorf("reason %q maps back to %v, want %v", w.reason, got, w.err)
		}
		wrapped := fail(w.err, "detail")
		if Reason(wrapped) != w.reason || Status(wrapped) != w.status {
			t.Errorf("%v: reason %q status %d, want %q %d", w.err, Reason(wrapped), Status(wrapped), w.reason, w.status)
		}
	}
	if Reason(errors.New("x")) != "internal" || Status(errors.New("x")) != 500 || FromReason("nonsense") != nil {
		t.Error("an unknown failure is not internal")
	}
	d := sha256.Sum256([]byte("x"))
	for _, v := range []string{FormatDigest(d), "sha-512=:AAAA:, " + FormatDigest(d), FormatDigest(d) + ", md5=:x:"} {
		if got, ok := ParseDigest(v); !ok || got != d {
			t.Errorf("ParseDigest(%q) = %x %v", v, got, ok)
		}
	}
	for _, v := range []string{"", "sha-256=abc", "sha-256=:AAAA:", "sha-512=:" + base64.StdEncoding.EncodeToString(d[:]) + ":"} {
		if _, ok := ParseDigest(v); ok {
			t.Errorf("ParseDigest(%q) accepted", v)
		}
	}
}

// FuzzDecodeHandle: decoding never panics, and whatever decodes re-encodes to the same text.
func FuzzDecodeHandle(f *testing.F) {
	f.Add(Mint(secret, "hello", "lead", sample(), time.Unix(1_800_000_000, 0)).String())
	f.Add(payloadHandle("f", "lead", "a.txt", validTail()))
	f.Add("pf1.")
	f.Add("pf1.AAAA")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		h, err := Decode(s)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("Decode(%q): %v is not ErrMalformed", s, err)
			}
			return
		}
		if got := h.String(); got != s {
			t.Fatalf("Decode(%q) re-encodes to %q", s, got)
		}
		h.Verify(secret)
		h.Expired(time.Now())
	})
}
