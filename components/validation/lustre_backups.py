"""Rules on FSx for Lustre backups: asked for only where FSx makes them."""

from __future__ import annotations

from collections.abc import Iterator

from components.errors import Problem
from components.validation.parse import Parsed

BACKUP_DAYS = "storage.lustre.backupRetentionDays"


def no_backups_of_s3_linked_lustre(p: Parsed) -> Iterator[Problem]:
    """A Lustre file system linked to S3 (`dataRepositories`) takes no automatic backups: "File system backups
    aren't supported on file systems that are linked to an Amazon S3 data repository"
    (https://docs.aws.amazon.com/fsx/latest/LustreGuide/fsx-data-repositories.html; [BC] fsx CreateBackup: only
    file systems that "are not linked to a data repository"). S3 holds the durable copy. Left unset, the days
    default to 0 on a linked file system (`components.planning.lustre.automatic_backup_retention_days`)."""
    fs = p.storage.lustre if p.storage else None
    if fs is None or not fs.data_repositories:
        return
    if fs.backup_retention_days and "backup_retention_days" in fs.model_fields_set:
        yield Problem(
            BACKUP_DAYS,
            f"{fs.backup_retention_days} days asked for a file system linked to S3 (dataRepositories), which FSx "
            "does not back up (FSx Lustre guide, Using data repositories); set 0: S3 keeps the durable copy",
        )


RULES = (no_backups_of_s3_linked_lustre,)
