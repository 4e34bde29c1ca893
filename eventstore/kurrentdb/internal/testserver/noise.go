package testserver

import "fmt"

// statsStream is where a real node writes its periodic statistics; every
// $all reader sees these events between the user's.
const statsStream = "$stats-127.0.0.1:2113"

// startupNoiseLocked writes what a fresh node has in $all before any user
// write: the metadata of its stats stream and a first stats event. An
// adapter that reads $all from the start meets a system stream, a
// metastream and two system event types at once.
func (st *store) startupNoiseLocked() {
	st.systemWriteLocked("$$"+statsStream, "$metadata", []byte(`{"$maxAge":86400}`))
	st.statsLocked()
	st.publishLocked()
}

// noteAppendLocked counts a user append and writes a stats event after
// every statsEvery of them.
func (st *store) noteAppendLocked() {
	st.appends++
	if st.statsEvery > 0 && st.appends%st.statsEvery == 0 {
		st.statsLocked()
	}
}

func (st *store) statsLocked() {
	data := fmt.Appendf(nil, `{"proc-id":1,"es-appends":%d,"sys-freeMem":1048576}`, st.appends)
	st.systemWriteLocked(statsStream, "$statsCollected", data)
}
