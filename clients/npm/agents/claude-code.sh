# Claude Code through Genway: source this file (. ./claude-code.sh), then run claude.
export ANTHROPIC_BASE_URL=http://127.0.0.1:8080     # Genway, without /v1
export ANTHROPIC_AUTH_TOKEN="$GENWAY_API_KEY"       # a Genway key (sk_live_...), sent as Authorization: Bearer
export ANTHROPIC_MODEL=synthetic/echo               # a Genway model id (claude --model overrides it)
export ANTHROPIC_DEFAULT_OPUS_MODEL="$ANTHROPIC_MODEL"
export ANTHROPIC_DEFAULT_SONNET_MODEL="$ANTHROPIC_MODEL"
export ANTHROPIC_DEFAULT_HAIKU_MODEL="$ANTHROPIC_MODEL"  # background work: titles, summaries
export CLAUDE_CODE_SUBAGENT_MODEL="$ANTHROPIC_MODEL"
export CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1   # no feature flags, events or directory calls to Anthropic
export DISABLE_TELEMETRY=1 DISABLE_ERROR_REPORTING=1 DISABLE_AUTOUPDATER=1
