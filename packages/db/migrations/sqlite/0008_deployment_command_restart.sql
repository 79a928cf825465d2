ALTER TABLE `deployments` ADD `command` text;--> statement-breakpoint
ALTER TABLE `deployments` ADD `entrypoint` text;--> statement-breakpoint
ALTER TABLE `deployments` ADD `restart_policy` text DEFAULT 'no' NOT NULL;--> statement-breakpoint
ALTER TABLE `deployments` ADD `max_restarts` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `deployments` ADD `restart_count` integer DEFAULT 0 NOT NULL;