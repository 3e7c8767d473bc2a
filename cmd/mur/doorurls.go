package main

import (
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/murmur-run/murmur/roster"
)

// doorURLsHelp describes --door-urls (MUR_DOOR_URLS), which a container formation sets so that members
// reach each other by service name while roster.yaml keeps the loopback addresses of mur run.
const doorURLsHelp = "how members reach each other's doors, overriding url: in roster.yaml: NAME=URL pairs separated by commas, " +
	"e.g. lead=http://lead:7101,worker=http://worker:7102 (env MUR_DOOR_URLS; mur export writes it)"

// parseDoorURLs reads a --door-urls value: NAME=URL pairs separated by commas (spaces around them are
// ignored). Each URL must be http:// or https:// with a host; a name may appear once.
func parseDoorURLs(v string) (map[string]string, error) {
	out := map[string]string{}
	for pair := range strings.SplitSeq(v, ",") {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		name, raw, ok := strings.Cut(pair, "=")
		name, raw = strings.TrimSpace(name), strings.TrimSpace(raw)
		if !ok || name == "" || raw == "" {
			return nil, usagef("--door-urls %q: write NAME=URL pairs separated by commas, e.g. worker=http://worker:7102", pair)
		}
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return nil, usagef("--door-urls: %s=%s is not an http:// or https:// URL with a host (and no user, query or fragment)", name, raw)
		}
		if _, dup := out[name]; dup {
			return nil, usagef("--door-urls names %s twice; give each member one URL", name)
		}
		out[name] = strings.TrimRight(raw, "/")
	}
	return out, nil
}

// withDoorURLs returns a copy of r whose members named in urls are reached at those URLs. Every name
// must be a member of r, and no two members may end up at the same URL.
func withDoorURLs(r *roster.Roster, urls map[string]string) (*roster.Roster, error) {
	if len(urls) == 0 {
		return r, nil
	}
	out := *r
	out.Members = slices.Clone(r.Members)
	seen := map[string]string{}
	for i, m := range out.Members {
		if u, ok := urls[m.Name]; ok {
			out.Members[i].URL = u
		}
		if other, dup := seen[out.Members[i].URL]; dup {
			return nil, usagef("--door-urls: %s and %s would both be reached at %s; give each member a door of its own", other, m.Name, out.Members[i].URL)
		}
		seen[out.Members[i].URL] = m.Name
	}
	for _, name := range slices.Sorted(maps.Keys(urls)) {
		if _, ok := r.Member(name); !ok {
			return nil, usagef("--door-urls names %q, which is no member of %s; the members are %s", name, r.Path, strings.Join(r.Names(), ", "))
		}
	}
	return &out, nil
}

// applyDoorURLs parses a --door-urls value and applies it to r.
func applyDoorURLs(r *roster.Roster, v string) (*roster.Roster, error) {
	urls, err := parseDoorURLs(v)
	if err != nil {
		return nil, err
	}
	return withDoorURLs(r, urls)
}
