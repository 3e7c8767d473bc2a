// Package sandbox is where a member's commands run: the isolation probe (Probe: which of PID and
// network namespaces, cgroups and Landlock this host gives the runtime), confinement (Spec, and
// ConfineMain, the "_confine" re-exec init that applies Landlock, the namespaces and the memory limit
// before it execs the command, then reaps its tree), cgroups that bound and kill a command's tree, and
// the trusted PATH shell programs are resolved on.
//
// Concurrency: Probe is safe to call from any goroutine; a *Cgroups belongs to the one command it
// bounds, whose runner serializes its calls. ConfineMain runs in a process of its own.
//
// Imports: stdlib and x/sys only; never member or another member/... package.
package sandbox
