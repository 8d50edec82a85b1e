package localstore

import (
	"testing"

	"github.com/genway/genway/shared/admin"
	"github.com/genway/genway/shared/storetest"
)

func TestSessionStore(t *testing.T) {
	storetest.RunSessions(t, func(t *testing.T) admin.SessionStore { return openTemp(t) })
}
