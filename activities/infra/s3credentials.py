"""The credentials of the operator's S3 backup store (a tenant's bucket takes the
tenant's keys alone: ``backupstore.for_ref``)."""

from __future__ import annotations

import urllib3
from minio.credentials.providers import EnvAWSProvider, IamAwsProvider, Provider

from dbi import environment


def operator_credentials() -> Provider:
    """The operator's store's credentials, found as AWS's SDKs find them, in this order:
    the keys in ``AWS_ACCESS_KEY_ID`` and ``AWS_SECRET_ACCESS_KEY``; a web identity
    (``AWS_WEB_IDENTITY_TOKEN_FILE`` and ``AWS_ROLE_ARN``, as IRSA sets them), exchanged
    at ``AWS_ENDPOINT_URL_STS`` or AWS's STS; a container credentials endpoint (EKS Pod
    Identity, ECS). Never the EC2 instance metadata service, which a cluster off AWS
    may not answer at all. Temporary credentials are fetched again before they expire."""
    if environment.AWS_ACCESS_KEY_ID.get() and environment.AWS_SECRET_ACCESS_KEY.get():
        return EnvAWSProvider()
    fetching = urllib3.PoolManager(
        timeout=urllib3.Timeout(connect=5, read=30), retries=urllib3.Retry(total=3)
    )
    if environment.AWS_WEB_IDENTITY_TOKEN_FILE.get():
        sts = environment.AWS_ENDPOINT_URL_STS.get()
        return IamAwsProvider(custom_endpoint=sts, http_client=fetching)
    if (
        environment.AWS_CONTAINER_CREDENTIALS_FULL_URI.get()
        or environment.AWS_CONTAINER_CREDENTIALS_RELATIVE_URI.get()
    ):
        return IamAwsProvider(http_client=fetching)
    raise ValueError(
        "the S3 backup store needs credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
        "a web identity (AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN), or a container "
        "credentials endpoint (AWS_CONTAINER_CREDENTIALS_FULL_URI or _RELATIVE_URI)"
    )
