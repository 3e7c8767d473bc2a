// Package roster parses and validates a formation's roster.yaml (DESIGN §4.1) and answers the questions the
// rest of murmur asks of it: which members there are, in roster order; where each one's door listens and
// how its peers reach it; who may call whom; and whether a door URL is inside a capsule's
// capabilities.network.allow list.
//
// Contract:
//
//   - The package is pure: the standard library and gopkg.in/yaml.v3 only, no HTTP, nothing else of
//     murmur's. Parse touches the file system only to check that each capsule directory exists and holds a
//     murmur.yaml; reading and validating that murmur.yaml is the member package's business.
//   - Parse reports every problem in the file, not just the first: the error is an errors.Join of *Error
//     values in line order, each printed as FILE:LINE: what is wrong; what to write instead. Use errors.As
//     to reach them; never match their text. A read failure in Load wraps the fs error instead.
//   - On success every Member has an absolute Capsule, a Listen (defaulted to 127.0.0.1 with ports from
//     7101 up, skipping every port another member names) and a URL without a trailing slash (defaulted
//     from Listen, with a wildcard host replaced by 127.0.0.1).
//   - A member that no reach rule names as from may call nobody; reach: may be absent or empty. Listen
//     addresses must not collide (a wildcard host such as 0.0.0.0 takes its port on every address), and
//     neither may door URLs. In a container, leave listen: alone and set MUR_LISTEN instead; WithURLs
//     (MUR_DOOR_URLS) says how members reach each other there, by service name.
//   - A *Roster is not changed by any of its methods, so it is safe for concurrent use once built.
//     Reachable and Names return fresh slices in roster order, whatever the order of the reach rules.
package roster
