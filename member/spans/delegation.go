package spans

// Delegation is the delegation a sub-session serves (DESIGN §11), as its spans name it.
type Delegation struct {
	ID      string // dlg_…
	Capsule string // the sub-capsule's bare name, which delegate-task names it by
	Depth   int    // 1 for a member's sub-capsule
}

// Delegated notes that this session is the sub-session of delegation d: its task's invoke_agent span
// names the agent member/capsule and carries the delegation. It is called once, before the sub-session
// takes its task, whose span is the child of the delegating delegate-task call's.
func (st *Tracing) Delegated(d Delegation) {
	if st == nil {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	st.delegation = &d
}

// delegated is the delegation this session serves; nil for a member's own session.
func (st *Tracing) delegated() *Delegation {
	if st == nil {
		return nil
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.delegation
}
