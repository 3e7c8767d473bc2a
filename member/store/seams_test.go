package store

// waitingWrites reports the Creates and Updates handed to the group commit (or on their way to it) that
// have not returned yet.
func (s *Store) waitingWrites() int { return int(s.fg.active.Load()) }
