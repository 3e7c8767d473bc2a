package peercred

import (
	"errors"
	"strings"
	"testing"

	"github.com/murmur-run/murmur/internal/ids"
)

func TestCredentialRoundTrip(t *testing.T) {
	k := NewKey("mur_secret", "hello")
	for _, trust := range []ids.Trust{Trusted, Untrusted} {
		cred := k.Credential("lead", trust)
		id, err := k.Verify(cred)
		if err != nil {
			t.Fatalf("Verify(%q): %v", cred, err)
		}
		if id != (Identity{Member: "lead", Trust: trust}) {
			t.Fatalf("Verify(%q) = %+v", cred, id)
		}
		if strings.Contains(cred, "mur_secret") {
			t.Fatalf("the credential %q carries the secret", cred)
		}
	}
}

func TestCredentialsDiffer(t *testing.T) {
	k := NewKey("mur_secret", "hello")
	seen := map[string]string{}
	for _, c := range []struct {
		key    Key
		member string
		trust  ids.Trust
	}{
		{k, "lead", Trusted}, {k, "lead", Untrusted}, {k, "worker", Trusted},
		{NewKey("mur_other", "hello"), "lead", Trusted}, {NewKey("mur_secret", "other"), "lead", Trusted},
	} {
		cred := c.key.Credential(c.member, c.trust)
		mac := cred[strings.LastIndexByte(cred, '.')+1:]
		if prev, ok := seen[mac]; ok {
			t.Fatalf("%s and %s have the same mac", prev, cred)
		}
		seen[mac] = cred
	}
}

// A credential is refused when any part of it is changed: the member it names, the trust class it
// claims, the mac, the formation or the secret it was made with.
func TestForgeriesRefused(t *testing.T) {
	k := NewKey("mur_secret", "hello")
	good := k.Credential("worker", Untrusted)
	mac := good[strings.LastIndexByte(good, '.')+1:]
	flipped := []byte(mac)
	if flipped[3] == 'A' {
		flipped[3] = 'B'
	} else {
		flipped[3] = 'A'
	}
	cases := map[string]struct {
		key  Key
		cred string
		want error
	}{
		"claims another member":   {k, strings.Replace(good, "worker", "lead", 1), ErrForged},
		"claims trusted":          {k, strings.Replace(good, "untrusted", "trusted", 1), ErrForged},
		"altered mac":             {k, strings.TrimSuffix(good, mac) + string(flipped), ErrForged},
		"other secret":            {NewKey("mur_other", "hello"), good, ErrForged},
		"other formation":         {NewKey("mur_secret", "other"), good, ErrForged},
		"no secret":               {NewKey("", "hello"), good, ErrForged},
		"the secret itself":       {k, "mur_secret", ErrMalformed},
		"empty":                   {k, "", ErrMalformed},
		"unknown trust":           {k, "murp1.worker.root." + mac, ErrMalformed},
		"bad name":                {k, "murp1.Worker.untrusted." + mac, ErrMalformed},
		"extra part":              {k, good + ".x", ErrMalformed},
		"short mac":               {k, "murp1.worker.untrusted.AAAA", ErrMalformed},
		"padded mac":              {k, good + "=", ErrMalformed},
		"other version":           {k, strings.Replace(good, "murp1.", "murp2.", 1), ErrMalformed},
		"name with dot smuggling": {k, "murp1.work.er.untrusted." + mac, ErrMalformed},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			id, err := c.key.Verify(c.cred)
			if !errors.Is(err, c.want) {
				t.Fatalf("Verify(%q) = %+v, %v; want %v", c.cred, id, err, c.want)
			}
		})
	}
}

func FuzzVerify(f *testing.F) {
	k := NewKey("mur_secret", "hello")
	f.Add(k.Credential("lead", Trusted))
	f.Add("murp1.lead.trusted.")
	f.Add("")
	f.Fuzz(func(t *testing.T, cred string) {
		id, err := k.Verify(cred)
		if err != nil {
			return
		}
		if k.Credential(id.Member, id.Trust) != cred {
			t.Fatalf("Verify accepted %q, which is not the credential of %+v", cred, id)
		}
	})
}

// Contains finds a credential of any formation inside a longer string, and nothing that merely starts like
// one.
func TestContains(t *testing.T) {
	cred := NewKey("mur_secret", "hello").Credential("lead", Trusted)
	other := NewKey("mur_other", "elsewhere").Credential("w-2", Untrusted)
	mac := cred[strings.LastIndexByte(cred, '.')+1:]
	for _, tc := range []struct {
		s    string
		want bool
	}{
		{cred, true},
		{other, true},
		{"Bearer " + cred + "\n", true},
		{"x=murp1.lead.trusted.short murp1. " + cred, true}, // a near miss before the real one
		{"murp1.lead.trusted." + mac[:len(mac)-1], false},   // one character short
		{"murp1.lead.admin." + mac, false},                  // no trust class
		{"murp1.Lead.trusted." + mac, false},                // no member name
		{"murp1.lead.trusted." + mac[:10] + "!" + mac[11:], false},
		{"murp2.lead.trusted." + mac, false},
		{"murp1.", false},
		{"", false},
		{"mur_0123456789abcdef", false},
	} {
		if got := Contains(tc.s); got != tc.want {
			t.Errorf("Contains(%q) = %v, want %v", tc.s, got, tc.want)
		}
	}
}
