ALTER TABLE `deployments` ADD `billed_ms` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `deployments` ADD `removed_from_node_at` integer;--> statement-breakpoint
CREATE INDEX `deployments_status_idx` ON `deployments` (`status`);