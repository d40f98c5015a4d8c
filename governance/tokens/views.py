"""The API token settings page: a user lists, creates and revokes their own tokens.

A new token's secret is rendered once, in the response to the POST that created it, and never
stored; the page then shows only its prefix.
"""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from authority import access
from authority.models import Role, RoleGrant

from . import services as tokens

READ_ONLY = "read"


class TokenForm(forms.Form):
    name = forms.CharField(max_length=100, help_text="where the token is used, e.g. ci-pipeline")
    scope = forms.ChoiceField(help_text="one of your roles in one project, or read only")
    days = forms.TypedChoiceField(
        coerce=int,
        choices=[(d, f"{d} days") for d in tokens.LIFETIMES_DAYS],
        initial=tokens.DEFAULT_LIFETIME_DAYS,
        label="Expires after",
    )

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        grants = RoleGrant.objects.filter(user=user).select_related("project").order_by("project__slug", "role")
        self.grants = {f"{g.project_id}:{g.role}": g for g in grants}
        self.fields["scope"].choices = [(READ_ONLY, "read only, all your projects")] + [
            (key, f"{Role(g.role).label} in {g.project.slug}") for key, g in self.grants.items()
        ]


@login_required
def token_list(request, form: TokenForm | None = None, issued=None, status: int = 200):
    return render(
        request,
        "governance/api_tokens.html",
        {
            "tokens": [(t, tokens.scope_label(t)) for t in tokens.tokens_of(user=request.user)],
            "form": form or TokenForm(user=request.user),
            "issued": issued,
        },
        status=status,
    )


@login_required
@require_POST
def token_create(request):
    form = TokenForm(request.POST, user=request.user)
    if not form.is_valid():
        return token_list(request, form=form, status=400)
    grant = form.grants.get(form.cleaned_data["scope"])
    try:
        issued = tokens.token_create(
            user=request.user,
            name=form.cleaned_data["name"],
            project=grant.project if grant else None,
            role=grant.role if grant else None,
            days=form.cleaned_data["days"],
        )
    except (tokens.TokenRefused, access.AccessDenied) as error:
        form.add_error(None, str(error))
        return token_list(request, form=form, status=400)
    return token_list(request, issued=issued)


@login_required
@require_POST
def token_revoke(request, pk: int):
    try:
        token = tokens.token_revoke(user=request.user, token_id=pk)
    except tokens.TokenRefused as error:
        messages.error(request, str(error))
    else:
        messages.success(request, f"Token {token.name} revoked.")
    return redirect("api-tokens")
