"""The topics of the search corpus: how rows about each topic are written.

Each topic has several *phrasings* that share few words with each other (a customer asking to
"cancel the subscription" and one who "will not renew the contract" want the same thing), so a
query in other words than a row's has to be matched by meaning. ``{slots}`` are filled from
:data:`SLOTS`; ``{order}``, ``{invoice}`` and ``{ticket}`` become identifiers a query can name.

The labelled queries (``search_queries.jsonl``) are judged by these topic labels only, never by
what a search returns.
"""

from __future__ import annotations

#: Filler shared by every topic (greeting, sign-off): words that carry no topic.
OPENERS = (
    "Hi team,",
    "Hello,",
    "Good morning,",
    "Hey there,",
    "Dear support,",
    "Hi,",
    "",
    "",
)
CLOSERS = (
    "Thanks.",
    "Thank you in advance.",
    "Best regards.",
    "Cheers.",
    "Appreciate your help.",
    "Looking forward to hearing from you.",
    "",
    "",
)

SLOTS: dict[str, tuple[str, ...]] = {
    "product": ("the platform", "your tool", "the app", "the software", "the dashboard"),
    "when": ("this week", "today", "since Monday", "for two days", "since yesterday", "again"),
    "team": ("our team", "my colleagues", "the sales team", "our ops people", "everyone here"),
    "crm": ("Salesforce", "HubSpot", "Pipedrive", "Zoho", "Dynamics"),
    "tool": ("Slack", "Zapier", "Google Sheets", "Outlook", "Teams", "Jira"),
    "day": ("Tuesday", "Thursday", "Friday", "Monday", "Wednesday"),
    "seats": ("25", "40", "60", "120", "300"),
}

#: topic -> (subjects, phrasings). Subjects are short (an inquiry's subject line).
TOPICS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "cancel": (
        ("Cancellation", "Cancel subscription", "Not renewing", "Terminate contract"),
        (
            "Please cancel our subscription at the end of the current term.",
            "We have decided to terminate the contract and will not be renewing.",
            "How do I close our account? We are moving to another vendor.",
            "Kindly discontinue the service for {team} from next month.",
            "We would like to end our plan and deactivate the workspace.",
            "Please switch off auto-renewal, we are winding down the agreement.",
            "Our board voted to drop {product}; please process the termination.",
            "We no longer need the licence, can you cancel it before the renewal date?",
        ),
    ),
    "login": (
        ("Login problem", "Cannot sign in", "Password reset", "Locked out"),
        (
            "I can't log in to {product} {when}, it says my credentials are invalid.",
            "The password reset link has expired every time I click it.",
            "My account is locked after three failed sign-in attempts.",
            "The two-factor code never arrives so I am stuck at the login screen.",
            "SSO keeps failing with an authentication error for {team}.",
            "Sign-in page just spins and sends me back to the login form.",
            "I forgot my password and the recovery email is not coming through.",
            "Our username was rejected by the single sign-on provider {when}.",
        ),
    ),
    "invoice_error": (
        ("Invoice error", "Wrong invoice", "Billing mistake", "Double charge"),
        (
            "Invoice {invoice} shows the wrong amount for our seats.",
            "We were charged twice on the card this month, see invoice {invoice}.",
            "The billing statement lists an incorrect VAT number.",
            "There is a duplicate charge on our credit card from your company.",
            "Our bill includes {seats} users but we only have ten.",
            "The invoice has the old company address and the tax is miscalculated.",
            "Invoice {invoice} was issued in dollars instead of euros.",
            "The billed total does not match the quote we signed.",
        ),
    ),
    "refund": (
        ("Refund request", "Money back", "Reimbursement", "Refund"),
        (
            "Could we get a refund for the unused months?",
            "Please reimburse the payment made by mistake on order {order}.",
            "I'd like my money back, the product did not meet our needs.",
            "Requesting a credit note for the returned items.",
            "When will the refund hit our bank account? It has been weeks.",
            "We expect a reimbursement for the downtime last quarter.",
            "Please reverse the transaction and send the funds back.",
            "Is a partial refund possible for the seats we removed?",
        ),
    ),
    "pricing": (
        ("Pricing question", "Quote request", "Price list", "Discount"),
        (
            "How much does the enterprise tier cost for {seats} seats?",
            "Could you send a quote for {seats} licences?",
            "Do you offer a discount for annual billing?",
            "Please share your price list and the rates for nonprofits.",
            "What is the cost per user on the premium package?",
            "Is there volume pricing if we go above {seats} users?",
            "We are comparing vendors, what are your tiers and rates?",
            "Can you tell me the monthly price of the starter edition?",
        ),
    ),
    "shipping": (
        ("Shipping delay", "Order not arrived", "Delivery late", "Where is my order"),
        (
            "Order {order} has not arrived yet and the tracking shows no movement.",
            "The shipment is late, it was due last week.",
            "Our delivery has been delayed {when}, any update?",
            "The parcel seems stuck at customs.",
            "The courier says the package was dispatched but nothing was delivered.",
            "Tracking number for order {order} is not updating.",
            "The hardware we ordered is still in transit after ten days.",
            "The consignment was supposed to reach our warehouse on {day}.",
        ),
    ),
    "data_export": (
        ("Data export", "Export to CSV", "Backup of data", "Download records"),
        (
            "How can I export all our contacts to CSV?",
            "We need to download a full backup of our data.",
            "Is there a way to get a dump of every record in the account?",
            "Can we extract the reports into Excel files?",
            "Is bulk export available through the API?",
            "Please send us an archive of all our historical records.",
            "We want to migrate our data out, what formats can you export?",
            "The export button produces an empty file.",
        ),
    ),
    "integration": (
        ("Integration issue", "CRM sync", "Webhook", "Connector"),
        (
            "How do we connect {product} with {crm}?",
            "The {crm} sync has been failing {when}.",
            "Our webhook is not firing when a record changes.",
            "Is there a {tool} integration available?",
            "Where do I generate an API key for the {crm} connector?",
            "The {tool} plugin stopped posting updates.",
            "Can the connector push fields both ways with {crm}?",
            "We need the API documentation to build a custom sync.",
        ),
    ),
    "onboarding": (
        ("Onboarding", "Getting started", "Training session", "Kickoff"),
        (
            "Is there a getting started guide for new users?",
            "Can you help us set up the workspace for {team}?",
            "We would like a training session for our new hires.",
            "When is the kickoff call for our implementation?",
            "What are the first steps after we sign up?",
            "Could someone walk {team} through the initial configuration?",
            "We need a tutorial on importing our first contacts.",
            "What does the implementation timeline look like for a team of {seats}?",
        ),
    ),
    "security": (
        ("Security questionnaire", "SOC 2 report", "GDPR", "Compliance"),
        (
            "Could you share your SOC 2 report?",
            "Our legal team needs your GDPR data processing agreement.",
            "Is customer data encrypted at rest and in transit?",
            "Please fill in our vendor security questionnaire.",
            "Where are your servers hosted and who are your subprocessors?",
            "Do you have recent penetration test results?",
            "What is your policy for handling a breach?",
            "Is the platform ISO 27001 certified?",
        ),
    ),
    "feature_request": (
        ("Feature request", "Suggestion", "Product idea", "Roadmap"),
        (
            "It would be great if you added a dark mode.",
            "Please add bulk editing to the contacts view.",
            "Suggestion: support custom fields on deals.",
            "Is a mobile version on the roadmap?",
            "We would love the ability to schedule reports.",
            "Could you build keyboard shortcuts into the editor?",
            "A nice improvement would be filters on the activity feed.",
            "Any plans to support multiple currencies?",
        ),
    ),
    "meeting": (
        ("Meeting", "Schedule a call", "Demo booking", "Reschedule"),
        (
            "Can we schedule a call next {day}?",
            "I'd like to book a demo for {team}.",
            "Let's find a time to meet this week.",
            "I sent a calendar invite for {day} at 10am.",
            "Could we reschedule our meeting to {day}?",
            "Are you free for a quick call on {day} afternoon?",
            "Please pick a slot on my calendar for the review.",
            "The appointment on {day} no longer works for me, can we move it?",
        ),
    ),
    "unsubscribe": (
        ("Unsubscribe", "Remove me", "Opt out", "No more emails"),
        (
            "Please remove me from your mailing list.",
            "Stop sending me these emails.",
            "Unsubscribe me from the newsletter.",
            "I want to opt out of all marketing messages.",
            "Take my address off your distribution list.",
            "I never signed up for these promotional emails.",
            "Do not email me again.",
            "How do I stop receiving your weekly digest?",
        ),
    ),
    "performance": (
        ("Slow app", "Performance issue", "Page crashes", "Error 500"),
        (
            "{product} is very slow {when}.",
            "The dashboard takes forever to load.",
            "The page crashes whenever I open a report.",
            "We keep getting error 500 on the reports page.",
            "Requests time out after thirty seconds.",
            "Everything lags when more than {seats} records are shown.",
            "The app freezes when {team} uploads a file.",
            "Search results take a minute to appear.",
        ),
    ),
}

#: Rows on no topic: chit-chat every conversation has. Never relevant to a topical query.
GENERAL = (
    "Thanks for the update.",
    "Sounds good, talk soon.",
    "See the attached document.",
    "Following up on my previous note.",
    "Happy to help, let me know if anything else comes up.",
    "Let me check with {team} and get back to you.",
    "Got it, thank you.",
    "Just checking in.",
    "Noted, I will pass it on.",
    "Have a great weekend.",
)

#: What we reply on each topic (outbound messages): on the topic, in the support team's words.
REPLIES = {
    "cancel": (
        "We have processed the cancellation; access remains until the end of the term.",
        "Sorry to see you go, your contract will not renew.",
    ),
    "login": (
        "I have reset your password, please try signing in again.",
        "Your account is unlocked now, you can log in.",
    ),
    "invoice_error": (
        "We corrected invoice {invoice} and issued a new one.",
        "Apologies for the billing error, the duplicate charge is voided.",
    ),
    "refund": (
        "Your refund has been approved and will arrive within five days.",
        "We issued a credit note for the returned items.",
    ),
    "pricing": (
        "Attached is the quote for {seats} seats with the annual discount.",
        "Our enterprise tier is priced per user; see the price list attached.",
    ),
    "shipping": (
        "Order {order} left our warehouse; the courier expects delivery on {day}.",
        "Sorry for the delay, the shipment cleared customs today.",
    ),
    "data_export": (
        "You can export every record from Settings, then Export, as CSV.",
        "The full backup of your data is ready to download.",
    ),
    "integration": (
        "The {crm} connector is fixed; the sync resumed.",
        "Here is the API key and the webhook documentation.",
    ),
    "onboarding": (
        "Welcome aboard! Here is the getting started guide.",
        "The kickoff call for your implementation is booked.",
    ),
    "security": (
        "Please find our SOC 2 report and the GDPR agreement attached.",
        "We completed your security questionnaire.",
    ),
    "feature_request": (
        "Thanks for the suggestion, we added it to the roadmap.",
        "Good idea, the product team will consider that feature.",
    ),
    "meeting": (
        "Booked: call on {day} at 3pm, invite sent.",
        "Happy to reschedule our meeting, does {day} work?",
    ),
    "unsubscribe": (
        "You have been removed from our mailing list.",
        "Done, you will not receive marketing emails any more.",
    ),
    "performance": (
        "Our engineers fixed the slow loading of the dashboard.",
        "The error 500 on reports is resolved, sorry for the trouble.",
    ),
}
