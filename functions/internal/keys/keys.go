// Package keys builds the SSM rotation of the vendor keys, for the
// functions that call a vendor (chat, media, worker, jobs-create): the
// one place it is defined. It is apart from package wire so that only
// those functions link the SSM client (its package alone adds about 1 MB
// and 2 ms to a cold start).
package keys

import (
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/genway/genway/functions/internal/wire"
	"github.com/genway/genway/shared/app/vendors"
	"github.com/genway/genway/shared/aws/secrets"
	"github.com/genway/genway/shared/providers/upstreams"
)

// Rotation returns where b's vendor keys are read: each key from the SSM
// parameter its <KEY>_PARAMETER variable names (else the plain variable),
// now and again every Config.SecretsTTL, so that a rotated key takes over
// without a deploy; the rest of the vendors' configuration is
// vendors.Settings'.
func Rotation(b *wire.Base) upstreams.Rotation {
	cache := secrets.New(ssm.NewFromConfig(b.AWS), b.Config.SecretsTTL)
	return upstreams.Rotation{Settings: vendors.Settings(b.Config), Key: secrets.Lookup(b.Config.Parameters, b.Config.Providers.Vars, cache),
		TTL: b.Config.SecretsTTL, Log: b.Log}
}
