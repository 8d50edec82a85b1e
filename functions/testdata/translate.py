"""Translate template.yaml with the SAM translator (shipped with cfn-lint)
and print, as JSON, the API Gateway stages the deployed stack would have:
the AWS::ApiGateway::Stage resources, and the StageName of each
AWS::ApiGateway::Deployment (SAM's extra "Stage" stage lives there); and
"resources", every resource of the translated template (the IAM roles SAM
generates, with its event-source additions, are checked from there).
No AWS call is made: CodeUri is replaced by a dummy S3 URI, and the
managed-policy map is empty. An optional second argument is a JSON object
of parameter values, as CloudFormation hands them to the transform (a
CommaDelimitedList as a list); the others take their defaults."""
import json
import sys

from cfnlint.decode import decode
from samtranslator.translator.transform import transform

tpl, problems = decode(sys.argv[1])
if tpl is None:
    sys.exit("cannot decode %s: %s" % (sys.argv[1], problems))
for r in tpl["Resources"].values():
    if r.get("Type") == "AWS::Serverless::Function":
        r["Properties"]["CodeUri"] = "s3://bucket/key"


class NoManagedPolicies:
    def load(self):
        return {}


params = json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}
out = transform(tpl, params, NoManagedPolicies())
res = out["Resources"]
print(json.dumps({
    "stages": sorted(k for k, v in res.items() if v["Type"] == "AWS::ApiGateway::Stage"),
    "deployment_stage_names": [v["Properties"]["StageName"] for v in res.values()
                               if v["Type"] == "AWS::ApiGateway::Deployment" and "StageName" in v.get("Properties", {})],
    "resources": res,
}, default=str))
