// Package runtimetools holds the runtime-provided tools of SPEC: tools with no artifact behind them, whose
// manifests the runtime writes at staging and whose calls it answers itself.
//
// Each tool is one file implementing Tool and declaring the narrow interface it needs from the session.
// A Registry is built explicitly from the tools a capsule is granted (there is no init() registration) and
// passed down to the agent loop, which dispatches calls through it. The gate table (Gates) says which
// declaration of murmur.yaml or roster.yaml each runtime-provided tool exists under; a call naming a tool that
// was not staged is refused with Unstaged, which names that declaration, as SPEC's "The grant is the tool's
// existence" requires.
//
// A Registry is read-only after construction and safe for concurrent use; a Tool's Run must be too.
package runtimetools
