ALTER TABLE `deposits` ADD `reference` text;--> statement-breakpoint
CREATE UNIQUE INDEX `deposits_reference_unique` ON `deposits` (`reference`);