// Package sandbox is where a member's commands run: the isolation probe (Probe: which of PID and
// network namespaces, cgroups and Landlock this host gives the runtime), confinement (Spec, and
// ConfineMain, the "_confine" re-exec init that applies Landlock, the namespaces and the memory limit
// before it execs the command, then reaps its tree), cgroups that bound and kill a command's tree, the
// trusted PATH shell programs are resolved on, the Runner that starts a confined command and reports how
// it ended (RunScript, a script capsule's run; RunCheck, lifecycle.done_check), and Commands: a
// session's shell calls (ShellTools) and the commands that moved to the background.
//
// Concurrency: Probe is safe to call from any goroutine. A Runner is read-only after NewRunner and safe
// for concurrent use. Commands keeps its background commands under a lock of its own (never the
// session's), and calls CommandsConfig.Ended with no lock of this package held. A *Cgroups belongs to
// the one command it bounds. ConfineMain runs in a process of its own.
//
// Imports: capsule (shell grants, a script capsule's command), runtimetools (the shell and background-command results), stdlib and
// x/sys; never member or another member/... package.
package sandbox
