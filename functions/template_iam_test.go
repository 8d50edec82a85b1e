package functions_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/genway/genway/shared/aws/dynamostore"
	"github.com/genway/genway/shared/catalog"
)

// The IAM of the stack: every permission a function has is one of the
// allow-list below, next to the code path that needs it, and every entry
// of the allow-list is granted (a permission the code stopped using goes
// from both). Wildcard actions are refused everywhere but in the media
// bucket's TLS-only Deny. Checked on template.yaml (the function
// policies as written) and on its SAM translation (the roles as deployed,
// with what SAM adds for event sources and tracing).

// Resources as the template writes them (resourceKey's form).
const (
	accountsTable = "${AccountsTable.Arn}"
	recordsTable  = "${RecordsTable.Arn}"
	// The records table's indexes: an account's records, and every
	// record's (dynamostore.RecordsByAccount, RecordsByTime).
	recordsByAccount = "${RecordsTable.Arn}/index/" + dynamostore.RecordsByAccount
	recordsByTime    = "${RecordsTable.Arn}/index/" + dynamostore.RecordsByTime
	jobsTable        = "${JobsTable.Arn}"
	byAccount        = "${JobsTable.Arn}/index/by_account"
	queuedIndex      = "${JobsTable.Arn}/index/queued"
	jobsQueue        = "${JobsQueue.Arn}"
	webhooksQueue    = "${WebhooksQueue.Arn}"
	failureQueue     = "${CreditsFailureQueue.Arn}"
	mediaObjects     = "${MediaBucket.Arn}/*"
	// The images of response_format url (images.Service: images/<account>/...).
	imageObjects = "${MediaBucket.Arn}/images/*"
	// The outputs of video jobs (jobs.Worker: jobs/<account>/<id>-<run>.<ext>,
	// a video's id job_video_...).
	videoObjects = "${MediaBucket.Arn}/jobs/*/job_video_*"

	// The accounts table's open reservation items only (partition
	// resv#0..resv#15): the one kind of item any function deletes.
	reservationItems = accountsTable + ` when {"ForAllValues:StringLike":{"dynamodb:LeadingKeys":["` + dynamostore.OpenReservationPrefix +
		`*"]},"Null":{"dynamodb:LeadingKeys":"false"}}`

	bedrockModels   = "arn:${AWS::Partition}:bedrock:${AWS::Region}::foundation-model/*"
	bedrockProfiles = "arn:${AWS::Partition}:bedrock:${AWS::Region}:${AWS::AccountId}:inference-profile/*"
	// A cross-region inference profile (the catalog's us.* models) runs the
	// model in another region of its geography: any region's models, but
	// only through this region's profiles.
	bedrockRouted = "arn:${AWS::Partition}:bedrock:*::foundation-model/*" +
		` when {"StringLike":{"bedrock:InferenceProfileArn":"arn:${AWS::Partition}:bedrock:${AWS::Region}:${AWS::AccountId}:inference-profile/*"}}`
)

// ssmParameter is the ARN of the SSM parameter named by template parameter
// p (parameter names start with "/").
func ssmParameter(p string) string {
	return "arn:${AWS::Partition}:ssm:${AWS::Region}:${AWS::AccountId}:parameter${" + p + "}"
}

// perm is one permission: an action on a resource (resourceKey's form).
type perm struct{ action, resource string }

func (p perm) String() string { return p.action + " on " + p.resource }

// Why each function may do what. Store methods are dynamostore's; a
// TransactWriteItems is authorized item by item as PutItem / UpdateItem
// (DynamoDB has no TransactWriteItems action).
const (
	whyAuth       = "auth.Authenticator: KeyByHash (GetItem) of every API request's key"
	whyLimitRead  = "ratelimit.Limiter: Account (GetItem), the account's own rate limit"
	whyLimitCount = "ratelimit.Limiter: Incr (UpdateItem ADD) of the per-key minute counter"
	whySecrets    = "secrets.Cache: the vendor key, read at container start and again after secrets.DefaultTTL"
)

// iamAllow is the allow-list: function -> permission -> the code path that
// needs it.
var iamAllow = map[string]map[perm]string{
	"ChatFunction": {
		{"dynamodb:GetItem", accountsTable}: whyAuth + "; " + whyLimitRead + "; chat.Admit: Account, the balance for a priced model; " +
			"Store.Settle of a held completion (a key with a credit limit): the reservation's entry; a 402's balance",
		{"dynamodb:UpdateItem", accountsTable}: whyLimitCount + "; chat.StoreRecorder -> AddRecords: the usage counters, " +
			"the account's debit and the key's spend (transaction Updates); a held completion's " +
			"Reserve and release: the account's and the key's holds (transaction Updates)",
		{"dynamodb:PutItem", accountsTable}: "AddRecords: the chat ledger entry (transaction Put, attribute_not_exists); a held completion's " +
			"Reserve: its ledger entry and open item, and its release's ledger entry (transaction Puts)",
		{"dynamodb:PutItem", recordsTable}: "chat.StoreRecorder -> AddRecords: each request's record (transaction Put, or PutItem for a " +
			"failed one; attribute_not_exists)",
		{"dynamodb:DeleteItem", reservationItems}:                   "a held completion's release: the reservation's open item (transaction Delete)",
		{"ssm:GetParameter", ssmParameter("OpenAIKeyParameter")}:    whySecrets + " (OPENAI_API_KEY_PARAMETER)",
		{"ssm:GetParameter", ssmParameter("AnthropicKeyParameter")}: whySecrets + " (ANTHROPIC_API_KEY_PARAMETER)",
		{"ssm:GetParameter", ssmParameter("GeminiKeyParameter")}:    whySecrets + " (GEMINI_API_KEY_PARAMETER)",
		{"bedrock:InvokeModel", bedrockModels}:                      "bedrock.Provider: Converse (Bedrock=on)",
		{"bedrock:InvokeModelWithResponseStream", bedrockModels}:    "bedrock.Provider: ConverseStream (Bedrock=on)",
		{"bedrock:InvokeModel", bedrockProfiles}:                    "bedrock.Provider: Converse of an inference profile (the catalog's us.* models)",
		{"bedrock:InvokeModelWithResponseStream", bedrockProfiles}:  "bedrock.Provider: ConverseStream of an inference profile",
		{"bedrock:InvokeModel", bedrockRouted}:                      "a cross-region profile's model in another region of its geography",
		{"bedrock:InvokeModelWithResponseStream", bedrockRouted}:    "a cross-region profile's model in another region of its geography",
	},
	"MediaFunction": {
		{"dynamodb:GetItem", accountsTable}: whyAuth + "; " + whyLimitRead + "; images/speech.Service: Account, the balance a 402 " +
			"names; Store.Settle: the reservation's entry (strongly consistent GetItem)",
		{"dynamodb:PutItem", accountsTable}: "Store.Reserve: the reservation's ledger entry and its open item (transaction Puts); " +
			"Store.Settle: the settlement's ledger entry (transaction Put, exactly once)",
		{"dynamodb:UpdateItem", accountsTable}: whyLimitCount + "; Store.Reserve: the hold (available >= amount); Store.Settle: " +
			"the account's balance and hold, and a capture's job usage counters (transaction Updates)",
		{"dynamodb:DeleteItem", reservationItems}: "Store.Settle: the reservation's open item (transaction Delete)",
		{"dynamodb:PutItem", recordsTable}: "Store.SettleRecord: the request's record in its settlement's transaction; AddRecords: " +
			"the record of a request that held nothing (a free speech)",
		{"s3:PutObject", imageObjects}:                                "images.Service: s3media.Put of an image asked for as a link (one PutObject: a seekable body)",
		{"s3:GetObject", imageObjects}:                                "s3media.URL: the image's presigned link",
		{"ssm:GetParameter", ssmParameter("OpenAIKeyParameter")}:      whySecrets + " (OPENAI_API_KEY_PARAMETER: OpenAI images and TTS)",
		{"ssm:GetParameter", ssmParameter("GeminiKeyParameter")}:      whySecrets + " (GEMINI_API_KEY_PARAMETER: Gemini image output)",
		{"ssm:GetParameter", ssmParameter("ElevenLabsKeyParameter")}:  whySecrets + " (ELEVENLABS_API_KEY_PARAMETER: ElevenLabs speech)",
		{"ssm:GetParameter", ssmParameter("FalKeyParameter")}:         whySecrets + " (FAL_KEY_PARAMETER: fal's FLUX)",
		{"ssm:GetParameter", ssmParameter("ReplicateTokenParameter")}: whySecrets + " (REPLICATE_API_TOKEN_PARAMETER: Replicate's FLUX)",
	},
	"ModelsFunction": {
		{"dynamodb:GetItem", accountsTable}:    whyAuth + "; " + whyLimitRead,
		{"dynamodb:UpdateItem", accountsTable}: whyLimitCount,
	},
	"CreditsAPIFunction": {
		{"dynamodb:GetItem", accountsTable}: whyAuth + "; " + whyLimitRead + "; httpapi.GetCredits: Account, and KeyByID for a key with a credit limit; " +
			"httpapi.GetWebhookSecret -> webhooks.Service.Secret: WebhookConfig",
		{"dynamodb:UpdateItem", accountsTable}: whyLimitCount + "; webhooks.Service.Secret: EnsureWebhookSecret (if_not_exists) on first use",
		{"dynamodb:GetItem", recordsTable}:     "httpapi.GetGeneration: Store.Record (GET /v1/generations/{id})",
	},
	"JobsCreateFunction": {
		{"dynamodb:GetItem", accountsTable}: whyAuth + "; " + whyLimitRead + "; jobs.Service.Create: Balances.Account (402 before a hold)",
		{"dynamodb:UpdateItem", accountsTable}: whyLimitCount + "; Store.Create: the credit hold (transaction Update, available >= price) " +
			"and the key's hold (transaction Update of its keyid# item, left >= price); " +
			"DELETE /v1/videos/{id}: jobs.Service.Delete -> credits.Apply -> Store.Settle (the account, the key's counters, a capture's job usage)",
		{"dynamodb:PutItem", accountsTable}: "DELETE /v1/videos/{id}: jobs.Service.Delete -> credits.Apply -> Store.Settle: the " +
			"settlement's ledger entry (a no-op, ErrAlreadySettled, when the credits stream settled it)",
		{"dynamodb:PutItem", jobsTable}: "Store.Create: the job and its idempotency key (transaction Puts)",
		{"dynamodb:GetItem", jobsTable}: "Store.Create's replay (the idempotency key, the job); jobs.Service.Cancel: Get; " +
			"Transition's read after a failed condition",
		{"dynamodb:UpdateItem", jobsTable}: "jobs.Service.Cancel: Transition; Create: a job whose enqueue failed is failed (Transition); " +
			"DELETE /v1/videos/{id}: Store.Delete (conditional: final, not deleted)",
		{"s3:DeleteObject", videoObjects}:                             "DELETE /v1/videos/{id}: jobs.Service.Delete -> s3media.Delete, the video's output only",
		{"sqs:SendMessage", jobsQueue}:                                "jobs.Service.Create: Enqueue (sqsqueue.Queue)",
		{"s3:GetObject", mediaObjects}:                                "s3media.URL: the presigned link of an idempotent replay of a completed job",
		{"ssm:GetParameter", ssmParameter("FalKeyParameter")}:         whySecrets + " (FAL_KEY_PARAMETER: cancel at fal)",
		{"ssm:GetParameter", ssmParameter("ReplicateTokenParameter")}: whySecrets + " (REPLICATE_API_TOKEN_PARAMETER: cancel at Replicate)",
	},
	"JobsGetFunction": {
		{"dynamodb:GetItem", accountsTable}:    whyAuth + "; " + whyLimitRead,
		{"dynamodb:UpdateItem", accountsTable}: whyLimitCount,
		{"dynamodb:GetItem", jobsTable}:        "jobs.Service.Get: Store.Get (GET /v1/jobs/{id})",
		{"dynamodb:BatchGetItem", jobsTable}:   "Store.List: getJobs, the page's jobs (GET /v1/jobs)",
		{"dynamodb:Query", byAccount}:          "Store.List: queryAccount, the caller's jobs newest first",
		{"s3:GetObject", mediaObjects}:         "s3media.URL: output links presigned at read time",
	},
	"AdminFunction": {
		{"dynamodb:GetItem", accountsTable}: "admin.Service: Account; RevokeKey's id pointer; Grant's read-back; " +
			"Reconcile: LedgerEntry; the console: SessionLive (every signed-in request)",
		{"dynamodb:PutItem", accountsTable}: "admin.Service: CreateKey/ImportKey (PutKey's transaction Puts), Grant's ledger entry, " +
			"AddAudit; Reconcile: Settle's ledger entry; the console: AddSession (sign-in)",
		{"dynamodb:UpdateItem", accountsTable}: "admin.Service: Grant (transaction Update), SetRateLimit, RevokeKey, " +
			"UpdateKey -> SetControls (the key record and its keyid# item, transaction Updates); " +
			"Reconcile: Settle's account update and job usage counters; playground jobs: Store.Create's hold; " +
			"the console: EndSession (sign-out)",
		{"dynamodb:Query", accountsTable}: "admin.Service: Ledger, Usage (chat and job usage), Audit (one partition each); " +
			"Reconcile: Store.OpenReservations",
		{"dynamodb:Scan", accountsTable}:          "admin.Service: Accounts and Keys (operator listings)",
		{"dynamodb:DeleteItem", reservationItems}: "Reconcile -> credits.ReleaseReservation -> Store.Settle: a stale reservation's open item (transaction Delete)",
		{"dynamodb:GetItem", jobsTable}:           "jobs.Service.GetAny and CancelAny: Store.Get",
		{"dynamodb:PutItem", jobsTable}:           "playground jobs: Store.Create (the job and its idempotency key)",
		{"dynamodb:UpdateItem", jobsTable}: "jobs.Service.CancelAny: Transition; a playground job whose " +
			"enqueue failed",
		{"dynamodb:BatchGetItem", jobsTable}:                         "Store.List: getJobs (console and admin API listings; Reconcile)",
		{"dynamodb:Scan", jobsTable}:                                 "Store.List: scanAll, every account's jobs (operator listing)",
		{"dynamodb:Query", byAccount}:                                "Store.List: queryAccount, one account's jobs (listings; Reconcile)",
		{"dynamodb:GetItem", recordsTable}:                           "admin.Service.Request: Store.Record (the Requests page's detail, GET /admin/v1/records/{id})",
		{"dynamodb:Query", recordsByAccount}:                         "admin.Service.Requests: Store.Records of one account",
		{"dynamodb:Query", recordsByTime}:                            "admin.Service.Requests: Store.Records of every account (16 partitions)",
		{"ssm:GetParameter", ssmParameter("AdminTokenParameter")}:    "admin.LoadingVerifier: the operator token, re-read every secrets.DefaultTTL",
		{"ssm:GetParameter", ssmParameter("ConsoleSecretParameter")}: "admin.LoadingSessionKeys: the console sessions' secret, re-read every secrets.DefaultTTL",
		{"sqs:SendMessage", jobsQueue}:                               "playground jobs: jobs.Service.Create's Enqueue",
		{"sqs:SendMessage", webhooksQueue}:                           "webhooks.Service.Resend (console, admin API): SendWebhook",
		{"s3:GetObject", mediaObjects}:                               "s3media.URL: the players' presigned links",
	},
	"WorkerFunction": {
		{"dynamodb:GetItem", jobsTable}:    "jobs.Worker: Store.Get of the job a message names; Transition's read after a failed condition",
		{"dynamodb:UpdateItem", jobsTable}: "jobs.Worker: Transition (claims, polls, completed, failed)",
		{"s3:PutObject", mediaObjects}: "s3media.Put: PutObject, or CreateMultipartUpload/UploadPart/" +
			"CompleteMultipartUpload (authorized as s3:PutObject)",
		{"s3:AbortMultipartUpload", mediaObjects}:                     "s3media.putMultipart: abort an upload that failed midway",
		{"sqs:SendMessage", jobsQueue}:                                "jobs.Worker: re-enqueue with a delay (polls of long generations, retries)",
		{"ssm:GetParameter", ssmParameter("ElevenLabsKeyParameter")}:  whySecrets + " (ELEVENLABS_API_KEY_PARAMETER)",
		{"ssm:GetParameter", ssmParameter("FalKeyParameter")}:         whySecrets + " (FAL_KEY_PARAMETER)",
		{"ssm:GetParameter", ssmParameter("ReplicateTokenParameter")}: whySecrets + " (REPLICATE_API_TOKEN_PARAMETER)",
		{"ssm:GetParameter", ssmParameter("VertexCredentialsParameter")}: whySecrets + " (GOOGLE_VERTEX_CREDENTIALS_PARAMETER: " +
			"the service-account key Veo's access tokens are made from)",
	},
	"JobsSweeperFunction": {
		{"dynamodb:Query", queuedIndex}:    "Store.QueuedBefore: the sparse index of jobs waiting for a message",
		{"dynamodb:UpdateItem", jobsTable}: "Store.MarkSwept; jobs.Service.Sweep fails a job that never starts (Transition)",
		{"dynamodb:GetItem", jobsTable}:    "MarkSwept's and Transition's read after a failed condition",
		{"sqs:SendMessage", jobsQueue}:     "jobs.Service.Sweep: Enqueue again",
		// The hourly reconciler ({"reconcile": true}): jobs.Reconcile.
		{"dynamodb:Scan", accountsTable}:          "jobs.Reconcile: Store.Accounts (every account, filtered on sk)",
		{"dynamodb:GetItem", accountsTable}:       "jobs.Reconcile: Store.LedgerEntry",
		{"dynamodb:PutItem", accountsTable}:       "jobs.Reconcile -> credits.Apply -> Store.Settle: the ledger entry",
		{"dynamodb:UpdateItem", accountsTable}:    "Store.Settle: the account's balance and hold, a capture's job usage counters, the key's counters",
		{"dynamodb:Query", byAccount}:             "jobs.Reconcile: Store.List, an account's final jobs",
		{"dynamodb:BatchGetItem", jobsTable}:      "Store.List: getJobs, the page's jobs",
		{"dynamodb:Query", accountsTable}:         "jobs.Reconcile -> Store.OpenReservations: one Query per resv# partition",
		{"dynamodb:DeleteItem", reservationItems}: "jobs.Reconcile -> credits.ReleaseReservation -> Store.Settle: the reservation's open item (transaction Delete)",
	},
	"CreditsFunction": {
		{"dynamodb:PutItem", accountsTable}: "lambdaevents.Changes -> credits.Apply -> Store.Settle: the ledger entry (transaction Put)",
		{"dynamodb:UpdateItem", accountsTable}: "Store.Settle: the account's balance and hold, a capture's job usage counters and " +
			"the job's key's counters (keyid# item) (transaction Updates)",
		{"dynamodb:GetItem", accountsTable}: "webhooks.Service.Changed -> Schedule: WebhookConfig, the account's default URL",
		{"dynamodb:GetItem", jobsTable}:     "webhooks.Service.Schedule: Jobs.Get, the ended job's webhook_url",
		{"sqs:SendMessage", webhooksQueue}:  "webhooks.Service.Schedule: SendWebhook (sqsqueue.Queue)",
		// Added by SAM for the stream's DestinationConfig.OnFailure.
		{"sqs:SendMessage", failureQueue}: "SAM: the stream event source's OnFailure destination (translation only)",
	},
	"WebhooksFunction": {
		{"dynamodb:GetItem", accountsTable}: "webhooks.Service.Deliver: Delivery, WebhookConfig (the URL, the secrets)",
		{"dynamodb:PutItem", accountsTable}: "webhooks.Service.Deliver: AddDelivery (attribute_not_exists), SaveDelivery " +
			"(the claim and the result, conditioned on attempts)",
		{"dynamodb:UpdateItem", accountsTable}: "webhooks.Service.Deliver -> ensure: EnsureWebhookSecret (if_not_exists)",
		{"dynamodb:GetItem", jobsTable}:        "webhooks.Service.Deliver: Jobs.Get, the event's data",
		{"s3:GetObject", mediaObjects}:         "httpapi.JobObject -> s3media.URL: the event's output link, presigned",
		{"sqs:SendMessage", webhooksQueue}:     "webhooks.Service.Process: the next attempt, delayed by the backoff",
	},
}

// samOnly are the allow-list entries SAM adds in translation (absent from
// template.yaml).
var samOnly = map[string]map[perm]bool{
	"CreditsFunction": {{"sqs:SendMessage", failureQueue}: true},
}

// managedAllow are the AWS managed policies SAM attaches, by role, and why.
// They come with SAM's event sources and tracing; their resources are "*"
// (AWS's), which no inline statement may have.
var managedAllow = map[string]map[string]string{
	"": { // every function
		"service-role/AWSLambdaBasicExecutionRole": "logs:CreateLogStream/PutLogEvents to the function's log group",
		"AWSXrayWriteOnlyAccess":                   "Globals.Function.Tracing: SAM attaches it whenever Tracing is set (on or off)",
	},
	"WorkerFunctionRole":   {"service-role/AWSLambdaSQSQueueExecutionRole": "the SQS event source mapping polls and deletes messages"},
	"WebhooksFunctionRole": {"service-role/AWSLambdaSQSQueueExecutionRole": "the webhooks queue's event source mapping polls and deletes messages"},
	"CreditsFunctionRole":  {"service-role/AWSLambdaDynamoDBExecutionRole": "the jobs-stream event source mapping reads the stream"},
	"ApiGatewayCloudWatchLogsRole": {
		"service-role/AmazonAPIGatewayPushToCloudWatchLogs": "API Gateway writes the stage's access log (ApiGatewayCloudWatchRole=create)",
	},
}

// resourceKeys returns the resources v names in the allow-list's form:
// "${X.Arn}" for !GetAtt X.Arn, "${X}" for !Ref X, a !Sub's string (its
// variables substituted by their own form), both branches of an !If
// (AWS::NoValue dropped), and each of a list.
func resourceKeys(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		var out []string
		for _, e := range x {
			out = append(out, resourceKeys(e)...)
		}
		return out
	case map[string]any:
		if r, ok := x["Ref"].(string); ok {
			if r == "AWS::NoValue" {
				return nil
			}
			return []string{"${" + r + "}"}
		}
		if l, ok := x["Fn::GetAtt"].([]any); ok && len(l) == 2 {
			return []string{fmt.Sprintf("${%v.%v}", l[0], l[1])}
		}
		if s, ok := x["Fn::Sub"].(string); ok {
			return []string{s}
		}
		if l, ok := x["Fn::Sub"].([]any); ok && len(l) == 2 {
			s, _ := l[0].(string)
			for name, val := range mapAt(l[1]) {
				if k := resourceKeys(val); len(k) == 1 {
					s = strings.ReplaceAll(s, "${"+name+"}", k[0])
				}
			}
			return []string{s}
		}
		if l, ok := x["Fn::If"].([]any); ok && len(l) == 3 {
			return append(resourceKeys(l[1]), resourceKeys(l[2])...)
		}
	}
	return []string{fmt.Sprintf("%v", v)}
}

// statementPerms returns the permissions of an Allow statement: each action
// on each resource, a resource under a Condition keyed with it (" when "
// and the condition as JSON, its values in resourceKeys' form).
func statementPerms(st map[string]any) []perm {
	var suffix string
	if c, ok := st["Condition"]; ok {
		b, _ := json.Marshal(normalize(c))
		suffix = " when " + string(b)
	}
	var out []perm
	for _, a := range actions(st) {
		for _, r := range resourceKeys(st["Resource"]) {
			out = append(out, perm{a, r + suffix})
		}
	}
	return out
}

// normalize replaces intrinsic functions in v by their resourceKeys form.
func normalize(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for _, k := range []string{"Ref", "Fn::GetAtt", "Fn::Sub", "Fn::If"} {
			if _, ok := x[k]; ok {
				if keys := resourceKeys(x); len(keys) == 1 {
					return keys[0]
				}
			}
		}
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = normalize(e)
		}
		return m
	case []any:
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = normalize(e)
		}
		return l
	}
	return v
}

// wildcardAction reports whether an action names more than one API call.
func wildcardAction(a string) bool { return strings.ContainsAny(a, "*?") }

// checkWildcards returns a problem for every wildcard action in an IAM
// statement anywhere under resources, but the bucket policy's Deny of
// s3:* without TLS.
func checkWildcards(resources map[string]any, bad func(string, ...any)) {
	names := make([]string, 0, len(resources))
	for name := range resources {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		r := resources[name]
		statements(mapAt(r, "Properties"), func(st map[string]any) {
			for _, a := range actions(st) {
				if !wildcardAction(a) {
					continue
				}
				tlsDeny := mapAt(r)["Type"] == "AWS::S3::BucketPolicy" && st["Effect"] == "Deny" && a == "s3:*" &&
					mapAt(st, "Condition", "Bool")["aws:SecureTransport"] == "false"
				if !tlsDeny {
					bad("%s: IAM action %q is a wildcard (only the bucket's TLS-only Deny may have one)", name, a)
				}
			}
		})
	}
}

// checkGrants compares the permissions a function has with the
// allow-list; complete also wants every allow-list entry granted.
func checkGrants(fn string, got []perm, complete bool, bad func(string, ...any)) {
	allow, ok := iamAllow[fn]
	if !ok {
		bad("%s: no allow-list entry in template_iam_test.go (say what its code calls)", fn)
		return
	}
	granted := map[perm]bool{}
	for _, p := range got {
		granted[p] = true
		if _, ok := allow[p]; !ok {
			bad("%s: %s is not in the allow-list (template_iam_test.go): no code path of the function justifies it", fn, p)
		}
	}
	if !complete {
		return
	}
	var missing []string
	for p := range allow {
		if !granted[p] {
			missing = append(missing, p.String())
		}
	}
	sort.Strings(missing)
	for _, p := range missing {
		bad("%s: allow-list entry %s is not granted (a stale entry, or the function cannot do what its code does)", fn, p)
	}
}

// checkIAM returns every IAM problem of template.yaml as written: wildcard
// actions, SAM policy templates and managed policies in a function's
// Policies, and permissions outside the allow-list.
func checkIAM(tpl map[string]any) []string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	resources := mapAt(tpl, "Resources")
	checkWildcards(resources, bad)
	for _, fn := range resourcesOfType(tpl, "AWS::Serverless::Function") {
		props := mapAt(resources, fn, "Properties")
		if _, ok := props["Role"]; ok {
			bad("%s: a Role of its own escapes the allow-list; use Policies with inline statements", fn)
		}
		var got []perm
		var walk func(p any)
		walk = func(p any) {
			switch x := p.(type) {
			case string:
				bad("%s: managed policy %q in Policies; use inline statements", fn, x)
			case map[string]any:
				if l, ok := x["Fn::If"].([]any); ok && len(l) == 3 {
					walk(l[1])
					walk(l[2])
					return
				}
				if refName(x) == "AWS::NoValue" {
					return
				}
				for k := range x {
					if k != "Statement" {
						bad("%s: policy %s; want inline statements only", fn, k)
					}
				}
				statements(x["Statement"], func(st map[string]any) {
					if st["Effect"] != "Allow" {
						return
					}
					got = append(got, statementPerms(st)...)
				})
			}
		}
		for _, p := range asList(props["Policies"]) {
			if p != nil {
				walk(p)
			}
		}
		checkGrants(fn, got, false, bad)
		// Everything but what SAM adds must be written here.
		var missing []string
		for p := range iamAllow[fn] {
			if !samOnly[fn][p] && !containsPerm(got, p) {
				missing = append(missing, p.String())
			}
		}
		sort.Strings(missing)
		for _, p := range missing {
			bad("%s: allow-list entry %s is not granted in template.yaml", fn, p)
		}
	}
	for fn := range iamAllow {
		if mapAt(resources, fn)["Type"] != "AWS::Serverless::Function" {
			bad("allow-list function %s is not a function of template.yaml", fn)
		}
	}
	return problems
}

func containsPerm(l []perm, p perm) bool {
	for _, x := range l {
		if x == p {
			return true
		}
	}
	return false
}

// managedName returns the part of a managed policy ARN after ":policy/".
func managedName(v any) string {
	keys := resourceKeys(v)
	if len(keys) != 1 {
		return fmt.Sprint(v)
	}
	_, name, ok := strings.Cut(keys[0], ":policy/")
	if !ok {
		return keys[0]
	}
	return name
}

// checkTranslatedIAM returns every IAM problem of the translated template:
// wildcard actions, managed policies outside managedAllow, inline
// permissions outside the allow-list, and allow-list entries not granted.
func checkTranslatedIAM(resources map[string]any) []string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	checkWildcards(resources, bad)
	roleOf := map[string]string{} // role -> function
	for name, r := range resources {
		if mapAt(r)["Type"] == "AWS::Lambda::Function" {
			roleOf[refName(mapAt(r, "Properties")["Role"])] = name
		}
	}
	var roles []string
	for name, r := range resources {
		if mapAt(r)["Type"] == "AWS::IAM::Role" {
			roles = append(roles, name)
		}
	}
	sort.Strings(roles)
	for _, role := range roles {
		props := mapAt(resources, role, "Properties")
		fn := roleOf[role]
		for _, m := range asList(props["ManagedPolicyArns"]) {
			if m == nil {
				continue
			}
			name := managedName(m)
			_, forAll := managedAllow[""][name]
			if _, ok := managedAllow[role][name]; !ok && !(fn != "" && forAll) {
				bad("%s: managed policy %s is not in managedAllow (template_iam_test.go)", role, name)
			}
		}
		var got []perm
		statements(props["Policies"], func(st map[string]any) {
			if st["Effect"] == "Allow" {
				got = append(got, statementPerms(st)...)
			}
		})
		if fn == "" {
			for _, p := range got {
				bad("%s: inline permission %s on a role of no function", role, p)
			}
			continue
		}
		checkGrants(fn, got, true, bad)
	}
	return problems
}

// checkSecrets returns every problem with how the functions get vendor
// keys: no {{resolve:...}} anywhere (CloudFormation resolves it once, into
// a readable environment); each function that calls a vendor has its
// key's parameter NAME in <KEY ENV>_PARAMETER under the vendor's
// condition, and ssm:GetParameter on exactly that parameter under the
// same condition; no function has a key's plain env var; the models
// function has no key and no parameter, only GENWAY_CONFIGURED.
func checkSecrets(tpl map[string]any, keyEnv map[string]string) []string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	b, _ := json.Marshal(tpl)
	if strings.Contains(string(b), "{{resolve:") {
		bad("template.yaml has a {{resolve:...}} dynamic reference: CloudFormation resolves it at deploy time into the " +
			"function's environment (readable, and not re-resolved after a rotation); pass the parameter's name instead")
	}
	resources := mapAt(tpl, "Resources")
	plain := map[string]bool{}
	for _, env := range keyEnv {
		plain[env] = true
	}
	for _, fn := range resourcesOfType(tpl, "AWS::Serverless::Function") {
		vars := mapAt(resources, fn, "Properties", "Environment", "Variables")
		wantVendors := secretVendors[fn]
		want := map[string]string{} // env var -> vendor
		for _, v := range wantVendors {
			want[keyEnv[v]+"_PARAMETER"] = v
		}
		for name, val := range vars {
			if plain[name] {
				bad("%s: %s holds a vendor key in the environment; give the function %s_PARAMETER (the SSM parameter's name)", fn, name, name)
			}
			if !strings.HasSuffix(name, "_PARAMETER") || name == "GENWAY_ADMIN_TOKEN_PARAMETER" || name == "GENWAY_CONSOLE_SECRET_PARAMETER" {
				continue
			}
			v, ok := want[name]
			if !ok {
				bad("%s: %s: the function does not call that vendor (secretVendors in template_iam_test.go)", fn, name)
				continue
			}
			wantVal := map[string]any{"Fn::If": []any{vendorParams[v].cond, map[string]any{"Ref": vendorParams[v].param}, map[string]any{"Ref": "AWS::NoValue"}}}
			if fmt.Sprint(val) != fmt.Sprint(wantVal) {
				bad("%s: %s = %v; want !If [%s, !Ref %s, !Ref AWS::NoValue]", fn, name, val, vendorParams[v].cond, vendorParams[v].param)
			}
		}
		for name := range want {
			if _, ok := vars[name]; !ok {
				bad("%s: no %s (it calls %s)", fn, name, want[name])
			}
		}
		// ssm:GetParameter: on exactly the wanted parameters, each under
		// its vendor's condition, in a policy under a condition that is
		// their Or.
		granted := map[string]bool{}
		var policyConds []string
		for _, p := range asList(mapAt(resources, fn, "Properties")["Policies"]) {
			cond := ""
			body := p
			if l, ok := mapAt(p)["Fn::If"].([]any); ok && len(l) == 3 {
				cond, _ = l[0].(string)
				body = l[1]
			}
			statements(mapAt(body)["Statement"], func(st map[string]any) {
				if !contains(asList(st["Action"]), "ssm:GetParameter") {
					return
				}
				if cond != "" {
					policyConds = append(policyConds, cond)
				}
				for _, r := range asList(st["Resource"]) {
					l, isIf := mapAt(r)["Fn::If"].([]any)
					if !isIf {
						if k := resourceKeys(r); len(k) == 1 && fn == "AdminFunction" {
							// The admin function's own secrets, under no vendor's condition.
							if p, ok := map[string]string{ssmParameter("AdminTokenParameter"): "AdminTokenParameter",
								ssmParameter("ConsoleSecretParameter"): "ConsoleSecretParameter"}[k[0]]; ok {
								granted[p] = true
								continue
							}
						}
						bad("%s: ssm:GetParameter on %v without its vendor's condition", fn, r)
						continue
					}
					rc, _ := l[0].(string)
					k := resourceKeys(l[1])
					v := vendorOfParam(k)
					if v == "" || vendorParams[v].cond != rc {
						bad("%s: ssm:GetParameter on %v under %s; want a vendor key's parameter under its condition", fn, k, rc)
						continue
					}
					granted[vendorParams[v].param] = true
				}
			})
		}
		for _, v := range wantVendors {
			if !granted[vendorParams[v].param] {
				bad("%s: no ssm:GetParameter on %s (%s_PARAMETER)", fn, vendorParams[v].param, keyEnv[v])
			}
		}
		for p := range granted {
			if p == "AdminTokenParameter" || p == "ConsoleSecretParameter" {
				continue
			}
			if !containsVendorParam(wantVendors, p) {
				bad("%s: ssm:GetParameter on %s, a vendor it does not call", fn, p)
			}
		}
		for _, c := range policyConds {
			var got []string
			for _, e := range asList(mapAt(tpl, "Conditions", c)["Fn::Or"]) {
				got = append(got, fmt.Sprint(mapAt(e)["Condition"]))
			}
			var wantConds []string
			for _, v := range wantVendors {
				wantConds = append(wantConds, vendorParams[v].cond)
			}
			sort.Strings(got)
			sort.Strings(wantConds)
			if strings.Join(got, ",") != strings.Join(wantConds, ",") {
				bad("%s: its ssm:GetParameter policy is under %s = Or%v; want Or%v (else a configured vendor's key is unreadable)", fn, c, got, wantConds)
			}
		}
	}
	// The models function learns "configured" from names alone.
	models := mapAt(resources, "ModelsFunction", "Properties", "Environment", "Variables")
	configured := map[string]string{} // provider -> condition
	join, _ := mapAt(models, "GENWAY_CONFIGURED")["Fn::Join"].([]any)
	if len(join) == 2 {
		for _, e := range asList(join[1]) {
			if l, ok := mapAt(e)["Fn::If"].([]any); ok && len(l) == 3 {
				configured[fmt.Sprint(l[1])] = fmt.Sprint(l[0])
			}
		}
	}
	for v, p := range vendorParams {
		if configured[v] != p.cond {
			bad("ModelsFunction: GENWAY_CONFIGURED lists %s under %q; want !If [%s, %s, !Ref AWS::NoValue]", v, configured[v], p.cond, v)
		}
	}
	if configured["bedrock"] != "BedrockOn" {
		bad("ModelsFunction: GENWAY_CONFIGURED lists bedrock under %q; want BedrockOn", configured["bedrock"])
	}
	return problems
}

// vendorParams are the template's key parameter and condition of each
// vendor with a key.
var vendorParams = map[string]struct{ param, cond string }{
	"openai":     {"OpenAIKeyParameter", "HasOpenAI"},
	"anthropic":  {"AnthropicKeyParameter", "HasAnthropic"},
	"gemini":     {"GeminiKeyParameter", "HasGemini"},
	"elevenlabs": {"ElevenLabsKeyParameter", "HasElevenLabs"},
	"fal":        {"FalKeyParameter", "HasFal"},
	"replicate":  {"ReplicateTokenParameter", "HasReplicate"},
	"vertex":     {"VertexCredentialsParameter", "HasVertex"},
}

// secretVendors are the vendors each function calls, so whose key it may
// read: chat the chat vendors; the worker the media vendors; jobs-create
// those that can cancel a processing job (jobs.Canceller: fal,
// Replicate); media those with image or speech models. Every other function reads no vendor key.
var secretVendors = map[string][]string{
	"ChatFunction":       {"openai", "anthropic", "gemini"},
	"WorkerFunction":     {"elevenlabs", "fal", "replicate", "vertex"},
	"JobsCreateFunction": {"fal", "replicate"},
	"MediaFunction":      {"openai", "gemini", "elevenlabs", "fal", "replicate"},
}

func vendorOfParam(keys []string) string {
	if len(keys) != 1 {
		return ""
	}
	for v, p := range vendorParams {
		if keys[0] == ssmParameter(p.param) {
			return v
		}
	}
	return ""
}

func containsVendorParam(vendors []string, param string) bool {
	for _, v := range vendors {
		if vendorParams[v].param == param {
			return true
		}
	}
	return false
}

// loadCatalog returns each provider's key env var in the built-in catalog.
func loadCatalog(t testing.TB) map[string]string {
	t.Helper()
	cat, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range cat.Providers {
		out[p.Name] = p.KeyEnv
	}
	return out
}

// catalogKeyEnv returns each vendor's key env var from the catalog.
func catalogKeyEnv(t testing.TB) map[string]string {
	t.Helper()
	cat := loadCatalog(t)
	out := map[string]string{}
	for v := range vendorParams {
		env := cat[v]
		if env == "" {
			t.Fatalf("catalog: provider %s has no key_env", v)
		}
		out[v] = env
	}
	return out
}

func TestTemplateIAM(t *testing.T) {
	tpl := loadTemplate(t, filepath.Join(repoRoot, "template.yaml"))
	for _, p := range checkIAM(tpl) {
		t.Error(p)
	}
}

func TestTemplateSecrets(t *testing.T) {
	tpl := loadTemplate(t, filepath.Join(repoRoot, "template.yaml"))
	for _, p := range checkSecrets(tpl, catalogKeyEnv(t)) {
		t.Error(p)
	}
}

func TestTranslatedTemplateIAM(t *testing.T) {
	for _, p := range checkTranslatedIAM(translate(t).Resources) {
		t.Error(p)
	}
}

// addStatement appends an inline statement to fn's Policies.
func addStatement(tpl map[string]any, fn string, st map[string]any) {
	p := mapAt(tpl, "Resources", fn, "Properties")
	p["Policies"] = append(asList(p["Policies"]), map[string]any{"Statement": []any{st}})
}

func allow(action string, resource any) map[string]any {
	return map[string]any{"Effect": "Allow", "Action": action, "Resource": resource}
}

var (
	getAttAccounts = map[string]any{"Fn::GetAtt": []any{"AccountsTable", "Arn"}}
	getAttJobs     = map[string]any{"Fn::GetAtt": []any{"JobsTable", "Arn"}}
)

// TestTemplateIAMCheckFails breaks the IAM and secrets rules in copies of
// the template and expects the checks to say so.
func TestTemplateIAMCheckFails(t *testing.T) {
	keyEnv := catalogKeyEnv(t)
	tests := []struct {
		name   string
		mutate func(tpl map[string]any)
		want   string
	}{
		{"dynamodb:* on a table", func(tpl map[string]any) {
			addStatement(tpl, "ChatFunction", allow("dynamodb:*", getAttAccounts))
		}, `"dynamodb:*" is a wildcard`},
		{"sqs:* on the queue", func(tpl map[string]any) {
			addStatement(tpl, "WorkerFunction", allow("sqs:*", map[string]any{"Fn::GetAtt": []any{"JobsQueue", "Arn"}}))
		}, `"sqs:*" is a wildcard`},
		{"s3:* allowed", func(tpl map[string]any) {
			addStatement(tpl, "JobsGetFunction", allow("s3:*", map[string]any{"Fn::Sub": "${MediaBucket.Arn}/*"}))
		}, `"s3:*" is a wildcard`},
		{"* on *", func(tpl map[string]any) {
			addStatement(tpl, "ModelsFunction", allow("*", "*"))
		}, `"*" is a wildcard`},
		{"bucket Deny turned Allow", func(tpl map[string]any) {
			st := mapAt(tpl, "Resources", "MediaBucketPolicy", "Properties", "PolicyDocument")["Statement"].([]any)
			mapAt(st[0])["Effect"] = "Allow"
		}, `MediaBucketPolicy: IAM action "s3:*"`},
		{"Scan on the accounts table from the API", func(tpl map[string]any) {
			addStatement(tpl, "CreditsAPIFunction", allow("dynamodb:Scan", getAttAccounts))
		}, "CreditsAPIFunction: dynamodb:Scan on ${AccountsTable.Arn} is not in the allow-list"},
		{"DeleteItem anywhere in the accounts table", func(tpl map[string]any) {
			addStatement(tpl, "MediaFunction", allow("dynamodb:DeleteItem", getAttAccounts))
		}, "MediaFunction: dynamodb:DeleteItem on ${AccountsTable.Arn} is not in the allow-list"},
		{"chat's DeleteItem without its partition condition", func(tpl map[string]any) {
			statements(mapAt(tpl, "Resources", "ChatFunction", "Properties")["Policies"], func(st map[string]any) {
				if slices.Contains(actions(st), "dynamodb:DeleteItem") {
					delete(st, "Condition")
				}
			})
		}, "ChatFunction: dynamodb:DeleteItem on ${AccountsTable.Arn} is not in the allow-list"},
		{"DeleteItem for the worker", func(tpl map[string]any) {
			addStatement(tpl, "WorkerFunction", allow("dynamodb:DeleteItem", getAttJobs))
		}, "WorkerFunction: dynamodb:DeleteItem on ${JobsTable.Arn} is not in the allow-list"},
		{"Query on every index", func(tpl map[string]any) {
			addStatement(tpl, "JobsGetFunction", allow("dynamodb:Query", map[string]any{"Fn::Sub": "${JobsTable.Arn}/index/*"}))
		}, "dynamodb:Query on ${JobsTable.Arn}/index/* is not in the allow-list"},
		{"DynamoDBCrudPolicy back", func(tpl map[string]any) {
			p := mapAt(tpl, "Resources", "ChatFunction", "Properties")
			p["Policies"] = append(asList(p["Policies"]), map[string]any{"DynamoDBCrudPolicy": map[string]any{"TableName": map[string]any{"Ref": "AccountsTable"}}})
		}, "ChatFunction: policy DynamoDBCrudPolicy; want inline statements only"},
		{"a managed policy", func(tpl map[string]any) {
			p := mapAt(tpl, "Resources", "ModelsFunction", "Properties")
			p["Policies"] = append(asList(p["Policies"]), "AmazonDynamoDBReadOnlyAccess")
		}, `managed policy "AmazonDynamoDBReadOnlyAccess"`},
		{"an allowed permission dropped", func(tpl map[string]any) {
			st := mapAt(tpl, "Resources", "JobsGetFunction", "Properties")["Policies"].([]any)[0]
			stmts := mapAt(st)["Statement"].([]any)
			mapAt(st)["Statement"] = stmts[1:]
		}, "JobsGetFunction: allow-list entry dynamodb:BatchGetItem on ${JobsTable.Arn} is not granted"},
		{"bedrock in every region without the profile condition", func(tpl map[string]any) {
			addStatement(tpl, "ChatFunction", allow("bedrock:InvokeModel", map[string]any{"Fn::Sub": "arn:${AWS::Partition}:bedrock:*::foundation-model/*"}))
		}, "bedrock:InvokeModel on arn:${AWS::Partition}:bedrock:*::foundation-model/* is not in the allow-list"},
		{"another vendor's key for models", func(tpl map[string]any) {
			addStatement(tpl, "ModelsFunction", allow("ssm:GetParameter", map[string]any{"Fn::Sub": ssmParameter("OpenAIKeyParameter")}))
		}, "ModelsFunction: ssm:GetParameter on " + ssmParameter("OpenAIKeyParameter") + " is not in the allow-list"},
		{"media deletes any object", func(tpl map[string]any) {
			addStatement(tpl, "MediaFunction", allow("s3:DeleteObject", map[string]any{"Fn::Sub": "${MediaBucket.Arn}/*"}))
		}, "MediaFunction: s3:DeleteObject on ${MediaBucket.Arn}/* is not in the allow-list"},
		{"media writes job outputs", func(tpl map[string]any) {
			addStatement(tpl, "MediaFunction", allow("s3:PutObject", map[string]any{"Fn::Sub": "${MediaBucket.Arn}/*"}))
		}, "MediaFunction: s3:PutObject on ${MediaBucket.Arn}/* is not in the allow-list"},
		{"jobs-create deletes any object", func(tpl map[string]any) {
			addStatement(tpl, "JobsCreateFunction", allow("s3:DeleteObject", map[string]any{"Fn::Sub": "${MediaBucket.Arn}/*"}))
		}, "JobsCreateFunction: s3:DeleteObject on ${MediaBucket.Arn}/* is not in the allow-list"},
		{"jobs-get writes", func(tpl map[string]any) {
			addStatement(tpl, "JobsGetFunction", allow("dynamodb:UpdateItem", getAttJobs))
		}, "JobsGetFunction: dynamodb:UpdateItem on ${JobsTable.Arn} is not in the allow-list"},
		{"a function of its own role", func(tpl map[string]any) {
			mapAt(tpl, "Resources", "CreditsFunction", "Properties")["Role"] = "arn:aws:iam::123456789012:role/admin"
		}, "CreditsFunction: a Role of its own"},
	}
	secretTests := []struct {
		name   string
		mutate func(tpl map[string]any)
		want   string
	}{
		{"a resolved key in the environment", func(tpl map[string]any) {
			mapAt(tpl, "Resources", "ChatFunction", "Properties", "Environment", "Variables")["OPENAI_API_KEY"] = map[string]any{
				"Fn::If": []any{"HasOpenAI", map[string]any{"Fn::Sub": "{{resolve:ssm:${OpenAIKeyParameter}}}"}, map[string]any{"Ref": "AWS::NoValue"}}}
		}, "{{resolve:...}}"},
		{"a plain key env var", func(tpl map[string]any) {
			mapAt(tpl, "Resources", "WorkerFunction", "Properties", "Environment", "Variables")["FAL_KEY"] = map[string]any{"Ref": "FalKeyParameter"}
		}, "WorkerFunction: FAL_KEY holds a vendor key"},
		{"models reads a key", func(tpl map[string]any) {
			mapAt(tpl, "Resources", "ModelsFunction", "Properties", "Environment", "Variables")["OPENAI_API_KEY_PARAMETER"] = map[string]any{
				"Fn::If": []any{"HasOpenAI", map[string]any{"Ref": "OpenAIKeyParameter"}, map[string]any{"Ref": "AWS::NoValue"}}}
		}, "ModelsFunction: OPENAI_API_KEY_PARAMETER: the function does not call that vendor"},
		{"worker without ElevenLabs' parameter", func(tpl map[string]any) {
			delete(mapAt(tpl, "Resources", "WorkerFunction", "Properties", "Environment", "Variables"), "ELEVENLABS_API_KEY_PARAMETER")
		}, "WorkerFunction: no ELEVENLABS_API_KEY_PARAMETER"},
		{"parameter under the wrong condition", func(tpl map[string]any) {
			mapAt(tpl, "Resources", "ChatFunction", "Properties", "Environment", "Variables")["GEMINI_API_KEY_PARAMETER"] = map[string]any{
				"Fn::If": []any{"HasOpenAI", map[string]any{"Ref": "GeminiKeyParameter"}, map[string]any{"Ref": "AWS::NoValue"}}}
		}, "ChatFunction: GEMINI_API_KEY_PARAMETER ="},
		{"no GetParameter for the cancel keys", func(tpl map[string]any) {
			p := mapAt(tpl, "Resources", "JobsCreateFunction", "Properties")
			p["Policies"] = asList(p["Policies"])[:1]
		}, "JobsCreateFunction: no ssm:GetParameter on FalKeyParameter"},
		{"key policy under a narrower condition", func(tpl map[string]any) {
			mapAt(tpl, "Conditions")["HasChatKey"] = map[string]any{"Fn::Or": []any{map[string]any{"Condition": "HasOpenAI"}, map[string]any{"Condition": "HasGemini"}}}
		}, "ChatFunction: its ssm:GetParameter policy is under HasChatKey"},
		{"media without ElevenLabs' parameter", func(tpl map[string]any) {
			delete(mapAt(tpl, "Resources", "MediaFunction", "Properties", "Environment", "Variables"), "ELEVENLABS_API_KEY_PARAMETER")
		}, "MediaFunction: no ELEVENLABS_API_KEY_PARAMETER"},
		{"media reads Anthropic's key", func(tpl map[string]any) {
			mapAt(tpl, "Resources", "MediaFunction", "Properties", "Environment", "Variables")["ANTHROPIC_API_KEY_PARAMETER"] = map[string]any{
				"Fn::If": []any{"HasAnthropic", map[string]any{"Ref": "AnthropicKeyParameter"}, map[string]any{"Ref": "AWS::NoValue"}}}
		}, "MediaFunction: ANTHROPIC_API_KEY_PARAMETER: the function does not call that vendor"},
		{"media key policy under a narrower condition", func(tpl map[string]any) {
			mapAt(tpl, "Conditions")["HasImageSpeechKey"] = map[string]any{"Fn::Or": []any{map[string]any{"Condition": "HasOpenAI"}, map[string]any{"Condition": "HasFal"}}}
		}, "MediaFunction: its ssm:GetParameter policy is under HasImageSpeechKey"},
		{"models without bedrock", func(tpl map[string]any) {
			join := mapAt(tpl, "Resources", "ModelsFunction", "Properties", "Environment", "Variables", "GENWAY_CONFIGURED")["Fn::Join"].([]any)
			join[1] = asList(join[1])[:3]
		}, "GENWAY_CONFIGURED lists bedrock"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tpl := loadTemplate(t, filepath.Join(repoRoot, "template.yaml"))
			tt.mutate(tpl)
			problems := checkIAM(tpl)
			if !strings.Contains(strings.Join(problems, "\n"), tt.want) {
				t.Errorf("checkIAM(broken) = %q; want a problem containing %q", problems, tt.want)
			}
		})
	}
	for _, tt := range secretTests {
		t.Run(tt.name, func(t *testing.T) {
			tpl := loadTemplate(t, filepath.Join(repoRoot, "template.yaml"))
			tt.mutate(tpl)
			problems := checkSecrets(tpl, keyEnv)
			if !strings.Contains(strings.Join(problems, "\n"), tt.want) {
				t.Errorf("checkSecrets(broken) = %q; want a problem containing %q", problems, tt.want)
			}
		})
	}
}

// TestTranslatedTemplateIAMCheckFails breaks copies of the translated
// template's roles and expects checkTranslatedIAM to say so.
func TestTranslatedTemplateIAMCheckFails(t *testing.T) {
	orig := translate(t).Resources
	tests := []struct {
		name   string
		mutate func(res map[string]any)
		want   string
	}{
		{"a managed full-access policy", func(res map[string]any) {
			p := mapAt(res, "ChatFunctionRole", "Properties")
			p["ManagedPolicyArns"] = append(asList(p["ManagedPolicyArns"]), "arn:aws:iam::aws:policy/AmazonDynamoDBFullAccess")
		}, "ChatFunctionRole: managed policy AmazonDynamoDBFullAccess"},
		{"the SQS execution role on the API", func(res map[string]any) {
			p := mapAt(res, "ModelsFunctionRole", "Properties")
			p["ManagedPolicyArns"] = append(asList(p["ManagedPolicyArns"]), "arn:aws:iam::aws:policy/service-role/AWSLambdaSQSQueueExecutionRole")
		}, "ModelsFunctionRole: managed policy service-role/AWSLambdaSQSQueueExecutionRole"},
		{"SAM's OnFailure grant gone", func(res map[string]any) {
			p := mapAt(res, "CreditsFunctionRole", "Properties")
			p["Policies"] = asList(p["Policies"])[:1]
		}, "CreditsFunction: allow-list entry sqs:SendMessage on ${CreditsFailureQueue.Arn} is not granted"},
		{"a policy template expanded", func(res map[string]any) {
			p := mapAt(res, "JobsGetFunctionRole", "Properties")
			p["Policies"] = append(asList(p["Policies"]), map[string]any{"PolicyName": "x", "PolicyDocument": map[string]any{"Statement": []any{
				allow("dynamodb:BatchWriteItem", map[string]any{"Fn::Sub": []any{"arn:${AWS::Partition}:dynamodb:${AWS::Region}:${AWS::AccountId}:table/${tableName}",
					map[string]any{"tableName": map[string]any{"Ref": "JobsTable"}}}}),
			}}})
		}, "JobsGetFunction: dynamodb:BatchWriteItem on arn:${AWS::Partition}:dynamodb:${AWS::Region}:${AWS::AccountId}:table/${JobsTable} is not in the allow-list"},
		{"a wildcard SAM would add", func(res map[string]any) {
			p := mapAt(res, "WorkerFunctionRole", "Properties")
			p["Policies"] = append(asList(p["Policies"]), map[string]any{"PolicyName": "x", "PolicyDocument": map[string]any{"Statement": []any{
				allow("sqs:SendMessage*", map[string]any{"Fn::GetAtt": []any{"JobsQueue", "Arn"}}),
			}}})
		}, `WorkerFunctionRole: IAM action "sqs:SendMessage*" is a wildcard`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var res map[string]any
			b, _ := json.Marshal(orig)
			if err := json.Unmarshal(b, &res); err != nil {
				t.Fatal(err)
			}
			tt.mutate(res)
			problems := checkTranslatedIAM(res)
			if !strings.Contains(strings.Join(problems, "\n"), tt.want) {
				t.Errorf("checkTranslatedIAM(broken) = %q; want a problem containing %q", problems, tt.want)
			}
		})
	}
}
