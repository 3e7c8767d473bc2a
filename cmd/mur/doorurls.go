package main

import (
	"strings"

	"github.com/murmur-run/murmur/roster"
)

// doorURLsHelp describes --door-urls (MUR_DOOR_URLS), which a container formation sets so that members
// reach each other by service name while roster.yaml keeps the loopback addresses of mur run.
const doorURLsHelp = "how members reach each other's doors, overriding url: in roster.yaml: NAME=URL pairs separated by commas, " +
	"e.g. lead=http://lead:7101,worker=http://worker:7102 (env MUR_DOOR_URLS; mur export writes it)"

// parseDoorURLs reads a --door-urls value: NAME=URL pairs separated by commas, spaces around them
// ignored, each name once. The roster checks the names and URLs.
func parseDoorURLs(v string) (map[string]string, error) {
	out := map[string]string{}
	for pair := range strings.SplitSeq(v, ",") {
		if pair = strings.TrimSpace(pair); pair == "" {
			continue
		}
		name, u, ok := strings.Cut(pair, "=")
		name, u = strings.TrimSpace(name), strings.TrimSpace(u)
		if !ok || name == "" || u == "" {
			return nil, usagef("--door-urls %q: write NAME=URL pairs separated by commas, e.g. worker=http://worker:7102", pair)
		}
		if _, dup := out[name]; dup {
			return nil, usagef("--door-urls names %s twice; give each member one URL", name)
		}
		out[name] = u
	}
	return out, nil
}

// applyDoorURLs returns r with the URLs of a --door-urls value.
func applyDoorURLs(r *roster.Roster, v string) (*roster.Roster, error) {
	urls, err := parseDoorURLs(v)
	if err != nil || len(urls) == 0 {
		return r, err
	}
	r, err = r.WithURLs(urls)
	if err != nil {
		return nil, usagef("--door-urls: %v", err)
	}
	return r, nil
}
